// Release: an operator frees a held or stuck event (/v1/release,
// /ui/release), its record kept, released, with its history.

package admin

import (
	"context"
	"fmt"
	"net/http"

	"github.com/hookonce/hookonce/dedupe"
	"net/url"
)

// release frees a record for an operator (Store.Free), recorded as the
// operator's attempt, and logs it.
func (h *Handler) release(ctx context.Context, sender, key string) (dedupe.State, error) {
	was, err := h.o.Store.Free(ctx, sender, key, dedupe.OperatorRelease(h.o.Now()))
	if err == nil {
		h.log.Warn("admin: record released by an operator", "sender", sender, "key", key, "was", was)
	}
	return was, err
}

// releaseEvent is POST /v1/release/{sender}/{key}: the record stays,
// released, with its history (DELETE forgets it).
func (h *Handler) releaseEvent(w http.ResponseWriter, r *http.Request) {
	sender, key := r.PathValue("sender"), r.PathValue("key")
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	was, err := h.release(ctx, sender, key)
	if err != nil {
		h.storeError(w, "release", err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"sender": sender, "key": key, "released": true, "was": was})
}

// uiRelease frees a held event for an operator on the event's page, as
// hookonce release does: the record stays, released, with its history.
func (h *Handler) uiRelease(w http.ResponseWriter, r *http.Request) {
	if !h.validCSRF(w, r) {
		return
	}
	sender, key, ok := h.formTarget(w, r)
	if !ok {
		return
	}
	ctx, cancel := h.storeCtx(r)
	defer cancel()
	was, err := h.release(ctx, sender, key)
	if err != nil {
		h.uiStoreError(w, "release", err)
		return
	}
	msg := fmt.Sprintf("Released (was %s): the next delivery of this event runs the site's handler.", was)
	http.Redirect(w, r, eventURL(sender, key)+"?note="+url.QueryEscape(msg), http.StatusSeeOther)
}
