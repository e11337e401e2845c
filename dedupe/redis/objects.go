package redis

import (
	"context"
	_ "embed"
	"fmt"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hookonce/hookonce/dedupe"
)

// Object locks (dedupe.ObjectLocker), for senders with serialize. Each
// object is one hash, and each operation one Lua script on it judged by the
// server's TIME, as claims are:
//
//	hookonce:obj:{scope:object}   o owner, lu lease until (Unix ms)
//
// The scope is escaped as sender names are, so no two (scope, object) pairs
// share a key, and the hash tag keeps each lock in one Cluster slot. A lock
// stays objectKeep past its lease, so a holder whose lease ended with no one
// taking the object since can still renew or free it; Redis forgets it
// after that. An unlock is published on the channel of the record
// (dedupe.ObjectSender(scope), object), the one WaitChange subscribes to.

var (
	//go:embed lua/objlock.lua
	objLockLua string
	//go:embed lua/objrenew.lua
	objRenewLua string
	//go:embed lua/objunlock.lua
	objUnlockLua string
	//go:embed lua/objholder.lua
	objHolderLua string

	objLockScript   = goredis.NewScript(objLockLua)
	objRenewScript  = goredis.NewScript(objRenewLua)
	objUnlockScript = goredis.NewScript(objUnlockLua)
	objHolderScript = goredis.NewScript(objHolderLua)
)

// objectKeep is how long an object lock outlives its lease.
const objectKeep = 10 * time.Minute

var _ dedupe.ObjectLocker = (*Store)(nil)

func objectKey(scope, object string) string {
	return prefix + "obj:{" + escSender(scope) + ":" + object + "}"
}

// objectChannel is where an unlock of (scope, object) is announced.
func objectChannel(scope, object string) string {
	return newRef(dedupe.ObjectSender(scope), object).channel()
}

// objectScope reports whether sender is dedupe.ObjectSender(scope), and
// its scope. No configured sender contains ':', so none is mistaken.
func objectScope(sender string) (string, bool) {
	return strings.CutPrefix(sender, dedupe.ObjectSender(""))
}

// LockObject implements dedupe.ObjectLocker (lua/objlock.lua).
func (s *Store) LockObject(ctx context.Context, scope, object, owner string, lease time.Duration) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, unavailable("lock object", err)
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	n, err := objLockScript.Run(ctx, s.client, []string{objectKey(scope, object)},
		owner, ms(lease), ms(objectKeep)).Int()
	if err != nil {
		return false, unavailable(fmt.Sprintf("lock object %s/%s", scope, object), err)
	}
	return n == 1, nil
}

// RenewObject implements dedupe.ObjectLocker (lua/objrenew.lua).
func (s *Store) RenewObject(ctx context.Context, scope, object, owner string, lease time.Duration) error {
	if err := ctx.Err(); err != nil {
		return unavailable("renew object", err)
	}
	if lease <= 0 {
		lease = DefaultLease
	}
	n, err := objRenewScript.Run(ctx, s.client, []string{objectKey(scope, object)},
		owner, ms(lease), ms(objectKeep)).Int()
	if err != nil {
		return unavailable(fmt.Sprintf("renew object %s/%s", scope, object), err)
	}
	if n != 1 {
		return fmt.Errorf("redis renew object %s/%s: %w", scope, object, dedupe.ErrNotOwner)
	}
	return nil
}

// UnlockObject implements dedupe.ObjectLocker (lua/objunlock.lua): the
// unlock is announced to WaitChange(ctx, dedupe.ObjectSender(scope),
// object).
func (s *Store) UnlockObject(ctx context.Context, scope, object, owner string) error {
	if err := ctx.Err(); err != nil {
		return unavailable("unlock object", err)
	}
	n, err := objUnlockScript.Run(ctx, s.client, []string{objectKey(scope, object)},
		owner, objectChannel(scope, object)).Int()
	if err != nil {
		return unavailable(fmt.Sprintf("unlock object %s/%s", scope, object), err)
	}
	if n != 1 {
		return fmt.Errorf("redis unlock object %s/%s: %w", scope, object, dedupe.ErrNotOwner)
	}
	return nil
}

// objectHolder is the holder of (scope, object) whose lease is live by the
// server's clock, or "" (free, or its lease ended: anyone may take it).
func (s *Store) objectHolder(ctx context.Context, scope, object string) (string, error) {
	return objHolderScript.Run(ctx, s.client, []string{objectKey(scope, object)}).Text()
}
