// Package dedupe defines what a claim on a webhook event is, what a store must
// guarantee about it, and the errors a store may answer with.
//
// It imports no database driver: the backends live beneath it (sqlite/,
// postgres/, redis/) and translate their drivers' errors into the sentinels
// declared here. Every backend runs dedupetest.RunConformance unchanged.
package dedupe

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"
)

// State is the life-cycle state of a record.
type State string

const (
	// StateProcessing: a proxy holds the claim (owner token + lease) and the
	// request is at the site.
	StateProcessing State = "processing"
	// StateDone: the site gave a final answer and it is stored for replay.
	StateDone State = "done"
	// StateUnknown: the site may or may not have run the handler (timeout or a
	// broken connection) and the sender asked to hold such claims
	// (ambiguous: hold). Only an operator moves it on.
	StateUnknown State = "unknown"
	// StateReleased: the site failed (or could not be reached) and the claim
	// was freed so the sender's retry runs the handler. The record stays, with
	// its payload hash and attempts, so an operator can see the event was
	// received and never completed; a later delivery claims it as new, with
	// any payload.
	StateReleased State = "released"
)

// Unretried is not a state a record is in but a filter over released and
// unknown ones: past their sender's retry window with no new attempt.
const Unretried = "unretried"

// Pending is not a state either but a filter: records with a durable
// delivery still owed to the site (ListFilter.Pending); such a record is
// done, its sender answered.
const PendingStatus = "pending"

// Status is a status filter as the CLI and the admin API take it
// (ParseStatus).
type Status struct {
	State     State // "" for any
	Unretried bool  // Unretried: released or unknown past the retry window
	Pending   bool  // PendingStatus: a durable delivery still owed
}

// ParseStatus reads a status filter: "" (any), a State, Unretried or
// PendingStatus. The error names what is accepted.
func ParseStatus(s string) (Status, error) {
	switch st := State(s); st {
	case "", StateProcessing, StateDone, StateUnknown, StateReleased:
		return Status{State: st}, nil
	case Unretried:
		return Status{Unretried: true}, nil
	case PendingStatus:
		return Status{Pending: true}, nil
	}
	return Status{}, errors.New("want processing, done, unknown, released, unretried or pending")
}

// MaxAttempts bounds the attempts a record keeps: the oldest go first.
const MaxAttempts = 20

// Attempt is one delivery of an event to the site, as the record keeps it.
type Attempt struct {
	At       time.Time     // when the delivery was claimed
	By       string        // AttemptBySender or AttemptByOperator
	Outcome  string        // the decision: processed, released, not_success, ambiguous, takeover, …
	Status   int           // the answer's status (the site's, or hookonce's own); 0 when none
	Duration time.Duration // time at the site
	Replica  string        // which hookonce instance forwarded it
	// Wait is how long the delivery waited for its business object
	// (serialize) before it ran or gave up; 0 when it waited for none.
	Wait time.Duration
}

// Who made an attempt.
const (
	AttemptBySender   = "sender"
	AttemptByOperator = "operator"
	// AttemptByDurable: a try of a durable delivery (ack: durable),
	// which hookonce owed the site after answering the sender itself.
	AttemptByDurable = "hookonce"
)

// ThisReplica names the running process as Attempt.Replica does: host/pid.
func ThisReplica() string {
	host, _ := os.Hostname()
	return fmt.Sprintf("%s/%d", host, os.Getpid())
}

// OperatorRelease is the attempt an operator's release (Store.Free)
// records: by the operator, outcome released, from this process.
func OperatorRelease(at time.Time) Attempt {
	return Attempt{At: at, By: AttemptByOperator, Outcome: "released", Replica: ThisReplica()}
}

// StoredRequest is what is kept of a claimed request, with
// store_request_body, so an operator can redeliver it.
type StoredRequest struct {
	Method string
	URI    string // the request-target as received: path and query
	Header http.Header
	// RemoteAddr is the address the request came from (host:port), so
	// a later delivery tells the site the sender's address; "" when not
	// kept.
	RemoteAddr string
}

// Sentinel errors. Backends wrap them; callers use errors.Is.
var (
	// ErrNotFound: no record for (sender, key).
	ErrNotFound = errors.New("record not found")
	// ErrNotOwner: the caller's owner token no longer holds the claim (it was
	// released, completed or taken over after its lease expired). The write
	// was not applied.
	ErrNotOwner = errors.New("claim not held by this owner")
	// ErrUnavailable: the store could not be reached or did not answer in
	// time. Nothing is known to have been written.
	ErrUnavailable = errors.New("store unavailable")
	// ErrNotConfirmed: the write was applied where the store took it (a
	// Redis primary; a PostgreSQL primary whose wait for its synchronous
	// standby was cancelled) but the replicas it waits for did not confirm
	// it, so a failover may lose it. Backends wrap it
	// together with ErrUnavailable, so a caller that knows only
	// ErrUnavailable treats it as a store error; a caller that must not
	// take the write as stored (by re-reading it, say) checks for it.
	ErrNotConfirmed = errors.New("write not confirmed by the store's replicas")
	// ErrReadOnly: the store was opened read-only (see ReadOnly) and the
	// call would write. Nothing was sent to the backend.
	ErrReadOnly = errors.New("store opened read-only")
	// ErrAccepted: the conflict was accepted already; it is not accepted
	// twice.
	ErrAccepted = errors.New("conflict already accepted")
	// ErrNotAcceptable: the conflict cannot be accepted (its payload was
	// not kept whole, or it was recorded in shadow mode).
	ErrNotAcceptable = errors.New("conflict cannot be accepted")
)

// Response is the site's answer as stored for replay.
type Response struct {
	Status int
	// Header holds only replay-safe headers (no hop-by-hop, Set-Cookie, Date).
	Header http.Header
	// Body is at most the sender's max_stored_body bytes.
	Body []byte
	// Truncated is set when the site's body was longer than what was stored;
	// a replay then answers Status with an empty body.
	Truncated bool
}

// Record is one (sender, key) pair as a store keeps it.
type Record struct {
	Sender string
	Key    string
	State  State
	// PayloadHash is the lowercase hex SHA-256 the contract computed for the
	// payload (raw bytes or canonical JSON, per sender).
	PayloadHash string
	// Owner is the token of the proxy that holds a processing claim; empty
	// otherwise.
	Owner string
	// LeaseUntil is when a processing claim becomes free for takeover.
	LeaseUntil  time.Time
	ReceivedAt  time.Time
	CompletedAt time.Time // zero until done
	ExpiresAt   time.Time
	Hits        int64 // deliveries answered from this record (replays)
	Takeovers   int64 // times an expired lease was taken over
	// Response is nil until the record is done.
	Response *Response
	// RequestBody is the claimed request's body, kept only when the sender
	// sets store_request_body; nil otherwise.
	RequestBody []byte
	// Request is the claimed request's method, target and headers, kept
	// with RequestBody; nil otherwise.
	Request *StoredRequest
	// Fingerprint is the claimed delivery's fields, each with a keyed
	// digest of its value, never the value (fingerprint.go); nil when the
	// delivery had none or was claimed by an older hookonce.
	Fingerprint []byte
	// Attempts are the deliveries to the site, oldest first, at most
	// MaxAttempts (the latest).
	Attempts []Attempt
	// Pending is the durable delivery still owed to the site (pending.go),
	// nil when none is.
	Pending *Pending
}

// LeaseExpired reports whether r is a processing claim whose lease ended
// before now: its proxy died or lost the store, and the next delivery
// takes it over. (Judged by the caller's clock, for display only.)
func (r Record) LeaseExpired(now time.Time) bool {
	return r.State == StateProcessing && !r.LeaseUntil.IsZero() && r.LeaseUntil.Before(now)
}

// LastAttempt returns the latest attempt, or the zero Attempt.
func (r Record) LastAttempt() Attempt {
	if len(r.Attempts) == 0 {
		return Attempt{}
	}
	return r.Attempts[len(r.Attempts)-1]
}

// Conflict is a delivery that reused a known key with another payload.
type Conflict struct {
	// ID names the conflict in its store: assigned by RecordConflict,
	// unique in the store and never reused (an SQLite or PostgreSQL row
	// id, a Redis stream id). It is the n of the accepted copy's key
	// (AcceptedKey).
	ID           string
	Sender       string
	Key          string
	StoredHash   string
	ReceivedHash string
	ReceivedAt   time.Time
	// ChangedPaths lists what differs between the stored original and the
	// refused payload, when both bodies were kept: the JSON paths whose
	// values differ (DiffKind "json") or the names of the form fields that
	// differ, as PHP names them (DiffKind "form"); nil otherwise. Never the
	// values. Computed by the caller.
	ChangedPaths []string
	// DiffKind says what ChangedPaths holds: DiffJSON, DiffForm,
	// DiffFields or "".
	DiffKind string
	// ExpiresAt is when Purge may remove the conflict.
	ExpiresAt time.Time
	// Shadow: recorded in shadow mode, where the site received the payload
	// all the same; such a conflict is shown, never accepted.
	Shadow bool
	// Request and Body are the refused delivery (method, target, headers
	// and body), kept under the rules of store_request_body: only when the
	// sender keeps requests, the body at most max_stored_body bytes
	// (BodyTruncated says when it was cut). nil when not kept.
	Request       *StoredRequest
	Body          []byte
	BodyTruncated bool
	// AnsweredDuplicate: the delivery was not refused but answered with
	// the stored original's answer (the sender's changed_payload:
	// duplicate), so its payload never reached the site. It is recorded
	// all the same, so that what differed is listed and the operator can
	// accept it (once) like a refused one.
	AnsweredDuplicate bool
	// AcceptedAt and AcceptedBy say when and by whom an operator accepted
	// the conflict (AcceptConflict); zero until then.
	AcceptedAt time.Time
	AcceptedBy string
}

// What Conflict.ChangedPaths holds.
const (
	DiffJSON = "json"
	DiffForm = "form"
	// DiffFields: the fields of the query and the body (JSON paths, form
	// fields as PHP names them) whose fingerprints differ (Fingerprint),
	// when no body was kept to compare.
	DiffFields = "fields"
)

// Kept reports whether the refused payload was kept whole, so that it can
// be accepted.
func (c Conflict) Kept() bool { return c.Request != nil && c.Body != nil && !c.BodyTruncated }

// Accepted reports whether an operator accepted the conflict.
func (c Conflict) Accepted() bool { return !c.AcceptedAt.IsZero() }

// AcceptedKey is the key under which the accepted copy of the conflict
// runs at the site: KEY:accepted-ID, a record of its own beside the
// original, so the copy is claimed, answered and replayed like any event
// and the site sees the Idempotency-Key SENDER:KEY:accepted-ID.
func (c Conflict) AcceptedKey() string { return AcceptedKey(c.Key, c.ID) }

// AcceptedKey is Conflict.AcceptedKey for a key and a conflict id.
func AcceptedKey(key, id string) string { return key + ":accepted-" + id }

// Acceptable says why the conflict cannot be accepted, or nil when it can.
func (c Conflict) Acceptable() error {
	switch {
	case c.Accepted():
		return fmt.Errorf("%w (conflict %s, at %s by %s)", ErrAccepted, c.ID, c.AcceptedAt.UTC().Format(time.RFC3339), c.AcceptedBy)
	case c.Shadow:
		return fmt.Errorf("%w: recorded in shadow mode, where the site received this payload already", ErrNotAcceptable)
	case c.Request == nil || c.Body == nil:
		return fmt.Errorf("%w: the refused payload was not kept (store_request_body is off for this sender)", ErrNotAcceptable)
	case c.BodyTruncated:
		return fmt.Errorf("%w: the refused body was longer than max_stored_body and was kept cut short", ErrNotAcceptable)
	}
	return nil
}

// PayloadAccepted is the error AcceptConflict answers, with first, when
// another conflict of the key with the same payload (ReceivedHash) was
// accepted already: a payload goes to the site once, however many of its
// deliveries were recorded. It names the first acceptance.
func PayloadAccepted(first Conflict) error {
	return fmt.Errorf("%w: this payload was accepted as conflict %s at %s by %s, and runs as %s",
		ErrAccepted, first.ID, first.AcceptedAt.UTC().Format(time.RFC3339), first.AcceptedBy, first.AcceptedKey())
}

// ClaimRequest asks for the claim on one event.
type ClaimRequest struct {
	Sender      string
	Key         string
	PayloadHash string
	// Owner is a fresh random token chosen by the caller; it fences every
	// later write on this claim.
	Owner string
	// Lease is how long the claim stays held without a Renew.
	Lease time.Duration
	// TTL is how long the record is kept after it is received.
	TTL time.Duration
	// RequestBody is kept with the record when non-nil (store_request_body).
	RequestBody []byte
	// Request is kept with the record when non-nil (store_request_body).
	Request *StoredRequest
	// Fingerprint is kept with the record (it replaces a released
	// record's, as the payload hash does). When nil, Fingerprinter (if
	// set) makes it, called by a store only when it writes the claim
	// (ClaimFingerprint), so that a duplicate answered from a read or a
	// cache never pays for it.
	Fingerprint   []byte
	Fingerprinter func() []byte
}

// ClaimFingerprint is the fingerprint a store writes with the claim:
// Fingerprint, else what Fingerprinter makes (once: it is kept in
// Fingerprint).
func (r *ClaimRequest) ClaimFingerprint() []byte {
	if r.Fingerprint == nil && r.Fingerprinter != nil {
		r.Fingerprint = r.Fingerprinter()
		r.Fingerprinter = nil
	}
	return r.Fingerprint
}

// Found says what a Claim found: the key new (Claimed) or given way
// (TakenOver), or a record that stands (Duplicate, Conflicting,
// InProgress, Held). The decision on the delivery that follows, as
// counted and logged, is its outcome (Attempt.Outcome, the traffic
// counters), not this.
type Found int

const (
	// Claimed: the key was new (or its record had expired, or was
	// released); the caller now owns a processing claim and must Complete,
	// Release or Hold it.
	Claimed Found = iota + 1
	// TakenOver: the key was processing under an expired lease and the same
	// payload hash; the caller now owns the claim (Takeovers was incremented).
	TakenOver
	// Duplicate: the key is done with the same payload hash; Record.Response
	// holds the stored answer. Nothing was written.
	Duplicate
	// Conflicting: the key is known with another payload hash. Nothing was
	// written; the caller records the conflict with RecordConflict.
	Conflicting
	// InProgress: the key is processing under a live lease with the same
	// payload hash. Nothing was written.
	InProgress
	// Held: the key is in StateUnknown with the same payload hash. Nothing was
	// written.
	Held
)

// Standing is what a stored record that does not give way (not free, not
// released, not past its lease) means for a delivery with payload hash
// hash: Conflicting for another payload, else Duplicate (done), Held
// (unknown) or InProgress. The backends that judge claims in Go share it.
func Standing(rec Record, hash string) Found {
	switch {
	case rec.PayloadHash != hash:
		return Conflicting
	case rec.State == StateDone:
		return Duplicate
	case rec.State == StateUnknown:
		return Held
	default:
		return InProgress
	}
}

var foundNames = map[Found]string{
	Claimed: "claimed", TakenOver: "taken_over", Duplicate: "duplicate",
	Conflicting: "conflict", InProgress: "in_progress", Held: "held",
}

func (f Found) String() string {
	if s, ok := foundNames[f]; ok {
		return s
	}
	return "found(?)"
}

// ClaimResult is a Claim's answer: what it found and the record as it stands
// after the claim (for Conflicting, the stored original, with its
// RequestBody when one was kept).
type ClaimResult struct {
	Found  Found
	Record Record
}

// Hit is a batch of replays to add to a record's hit counter.
type Hit struct {
	Sender, Key string
	N           int64
}

// ListFilter narrows List and Conflicts. Zero values mean "any"; Limit 0
// means a backend default of 100.
type ListFilter struct {
	Sender string
	State  State
	// Key, when set, keeps only that exact key (Conflicts).
	Key string
	// KeyPart, when set, keeps only keys that equal it or hold it as one
	// whole part (KeyHasPart): "8742591" finds 8742591:CONFIRMED.
	KeyPart string
	// Pending, when set, keeps only records with a durable delivery still
	// owed to the site (Record.Pending).
	Pending bool
	Limit   int
}

// Match reports whether rec passes f's sender, state, key and key-part
// filters (not the limit), for backends that filter in Go.
func (f ListFilter) Match(sender, key string, st State) bool {
	return (f.Sender == "" || sender == f.Sender) && (f.State == "" || st == f.State) &&
		(f.Key == "" || key == f.Key) && f.Keeps(key)
}

// Keeps reports whether key passes f's key-part filter (true when it
// sets none).
func (f ListFilter) Keeps(key string) bool { return f.KeyPart == "" || KeyHasPart(key, f.KeyPart) }

// KeyHasPart reports whether key equals part or holds it as one whole
// part. Keys are parts joined with ':' after each was escaped ('\' → '\\',
// ':' → '\:'), so the key is split at unescaped colons and each part
// unescaped before it is compared: "8742591" is a part of
// "8742591:CONFIRMED" and of "CONFIRMED:8742591", not of "87425910:X"
// nor of "a\:8742591" (one part, "a:8742591").
func KeyHasPart(key, part string) bool {
	if part == "" || key == part {
		return part != ""
	}
	var cur []byte
	esc := false
	for i := 0; i < len(key); i++ {
		c := key[i]
		switch {
		case esc:
			cur = append(cur, c)
			esc = false
		case c == '\\':
			esc = true
		case c == ':':
			if string(cur) == part {
				return true
			}
			cur = cur[:0]
		default:
			cur = append(cur, c)
		}
	}
	return string(cur) == part
}

// Pages runs a backend's query page by page until want results are kept
// (got counts them) or the rows run out: page reads up to lim rows from
// offset off and answers how many it read. Without a key-part filter
// every row is kept and one page is the whole answer; with one, the
// backend narrows by KeyPartNeedles and keeps only whole parts, so a page
// may keep fewer rows than it read.
func Pages(f ListFilter, want int, page func(lim, off int) (int, error), got func() int) error {
	if f.KeyPart == "" {
		_, err := page(want, 0)
		return err
	}
	for off := 0; ; {
		n, err := page(want, off)
		if err != nil {
			return err
		}
		if got() >= want || n < want {
			return nil
		}
		off += n
	}
}

// KeyPartNeedles are the substrings one of which every key holding part
// contains (the part as written and as escaped inside a key): a backend
// narrows with them in its own query language, then keeps only what
// KeyHasPart accepts.
func KeyPartNeedles(part string) []string {
	esc := strings.NewReplacer("\\", "\\\\", ":", "\\:").Replace(part)
	if esc == part {
		return []string{part}
	}
	return []string{part, esc}
}

// PurgeRequest says which records Purge removes. Records whose processing
// lease is still alive are never removed.
type PurgeRequest struct {
	// ReceivedBefore, when non-zero, removes records received before it;
	// when zero, Purge removes records past their ExpiresAt.
	ReceivedBefore time.Time
	// Limit bounds the number of records removed in one call (0: no bound),
	// so a background purge never holds the store for long.
	Limit int
	// Cursor, when non-nil, carries one run of calls (the same request,
	// repeated until a call comes back short) on from where the previous
	// call stopped: a store that finds what to remove in index order may
	// start there and advance it. A row a call skipped (locked by another
	// transaction, or under a live lease) may lie behind the cursor and is
	// left for the next run, so give every run a new zero PurgeCursor and
	// never keep one across runs. Stores that gain nothing leave it alone.
	Cursor *PurgeCursor
}

// PurgeCursor is where a run of Purge calls has got to (see
// PurgeRequest.Cursor). The zero value is the start; only the store that
// advanced it reads it.
type PurgeCursor struct {
	// Records and Conflicts are the largest ExpiresAt (ReceivedAt when the
	// request sets ReceivedBefore) of the rows the run removed so far.
	Records, Conflicts time.Time
}

// Reader is the part of a Store that only reads: what the operator's
// read-only commands (list, lookup, conflicts) need. Its methods follow the
// rules of Store.
type Reader interface {
	// Get returns one record with its stored response, or ErrNotFound.
	Get(ctx context.Context, sender, key string) (Record, error)

	// List returns records, newest received first.
	List(ctx context.Context, f ListFilter) ([]Record, error)

	// Conflicts returns recorded conflicts, newest first (State is ignored).
	Conflicts(ctx context.Context, f ListFilter) ([]Conflict, error)

	// AcceptedConflict returns the accepted conflict of (sender, key)
	// whose refused payload has the hash hash (Conflict.ReceivedHash), or
	// ErrNotFound when none was accepted. AcceptConflict keeps it to at
	// most one per payload. The proxy reads it only when a claim conflicts,
	// so that a retry of an accepted payload is answered from the accepted
	// copy's record (Conflict.AcceptedKey), never refused again.
	AcceptedConflict(ctx context.Context, sender, key, hash string) (Conflict, error)

	// Ping reports whether the store is reachable and migrated. It writes
	// nothing.
	Ping(ctx context.Context) error

	// Close releases the store's resources; safe to call twice.
	Close() error
}

// Migrator is a Store whose schema is versioned (SQLite, PostgreSQL).
// Every backend's Open connects and migrates, so a Store from Open is
// current; Migrate applies pending migrations and is idempotent and safe
// to run from several processes at once. Backends that migrate say so at
// compile time: var _ dedupe.Migrator = (*Store)(nil).
type Migrator interface {
	Migrate(ctx context.Context) error
}

// Store keeps claims, stored answers and conflicts.
//
// Every method honours ctx's deadline and answers an error wrapping
// ErrUnavailable when the backend cannot be reached or does not answer in
// time. Times are judged by the store's own clock (the database's, where
// there is one), never by the caller's.
type Store interface {
	Reader

	// Claim atomically decides one delivery against what is stored:
	//   - no record, or an expired one          → Claimed (record created, processing)
	//   - released, any payload hash            → Claimed (record re-owned, processing,
	//                                             hash, request, ReceivedAt and ExpiresAt as for
	//                                             a new claim; Attempts kept — they are the history;
	//                                             Takeovers may restart from 0)
	//   - other payload hash, any state          → Conflicting (nothing written)
	//   - done, same hash                        → Duplicate (nothing written)
	//   - processing, same hash, lease alive     → InProgress (nothing written)
	//   - processing, same hash, lease expired   → TakenOver (owner replaced, Takeovers+1)
	//   - unknown, same hash                     → Held (nothing written)
	// Under any number of concurrent callers on one key, from any number of
	// processes sharing the store, exactly one gets Claimed (or TakenOver) per
	// free claim.
	Claim(ctx context.Context, req ClaimRequest) (ClaimResult, error)

	// Complete stores the final answer, appends att to the attempts and
	// marks the record done, if owner still holds the processing claim;
	// otherwise ErrNotOwner and nothing is written.
	Complete(ctx context.Context, sender, key, owner string, resp Response, att Attempt) error

	// Release frees the claim if owner still holds it: the record moves to
	// StateReleased (owner and lease cleared, att appended), so the next
	// delivery claims it as new; otherwise ErrNotOwner.
	Release(ctx context.Context, sender, key, owner string, att Attempt) error

	// Hold moves a processing claim that owner holds to StateUnknown,
	// appending att; otherwise ErrNotOwner.
	Hold(ctx context.Context, sender, key, owner string, att Attempt) error

	// Renew extends owner's lease to lease from now; ErrNotOwner if it no
	// longer holds the claim.
	Renew(ctx context.Context, sender, key, owner string, lease time.Duration) error

	// RecordConflict appends a conflict, with its refused request when
	// one is kept, and assigns it an ID; it never touches the record.
	// ID, AcceptedAt and AcceptedBy of c are ignored.
	RecordConflict(ctx context.Context, c Conflict) error

	// AcceptConflict marks one conflict of (sender, key) accepted by by,
	// at the store's time, atomically and once: id names it (Conflict.ID),
	// or, when empty, the newest conflict of the key is meant. It answers
	// the conflict as now marked. ErrNotFound when there is no such
	// conflict; ErrAccepted, with the conflict as it stands, when it was
	// accepted already (by this call's rival too: of any number of
	// concurrent calls exactly one succeeds); ErrAccepted too, with the
	// conflict that was accepted (PayloadAccepted), when another conflict
	// of the key with the same ReceivedHash was accepted already (of
	// concurrent accepts of two such conflicts exactly one succeeds);
	// ErrNotAcceptable, with the
	// conflict, when its payload was not kept whole or it was recorded in
	// shadow mode (Conflict.Acceptable). Nothing is written on an error.
	AcceptConflict(ctx context.Context, sender, key, id, by string) (Conflict, error)

	// AddHits adds replay counts. It is called off the request path, in
	// batches; records that vanished are skipped silently.
	AddHits(ctx context.Context, hits []Hit) error

	// Free is the operator's release: whatever its state or owner, the
	// record becomes StateReleased (owner and lease cleared, stored answer
	// dropped; payload hash, kept request and attempts kept, att appended),
	// so the next delivery claims it as new and, if none comes, it stays
	// visible with its history. It answers the state the record was in, or
	// ErrNotFound if there is none. A proxy still forwarding under the freed
	// claim gets ErrNotOwner on its next write.
	Free(ctx context.Context, sender, key string, att Attempt) (State, error)

	// Forget removes a record whatever its state or owner, history and
	// all; ErrNotFound if there is none. A proxy still forwarding under the
	// removed claim gets ErrNotOwner on its next write.
	Forget(ctx context.Context, sender, key string) error

	// Purge removes records (and conflicts) as PurgeRequest says and
	// returns how many records went.
	Purge(ctx context.Context, req PurgeRequest) (int, error)

	// Probe makes one small real write, committed like a claim is, that
	// leaves nothing a read can see: it tells whether the store takes
	// writes now, where Ping only tells that it answers (a read-only
	// database, a full disk, a replica, a server refusing writes all
	// answer Ping). An error wraps ErrUnavailable. It writes where claims
	// write and needs no permission they do not need; backends that write
	// a record use the sender ProbeSender.
	Probe(ctx context.Context) error
}

// ProbeSender is the sender under which a backend's Probe may write (and
// at once remove) a record. No configured sender can have this name:
// sender names may not contain ':'.
const ProbeSender = "hookonce:probe"

// ObjectLocker is implemented by stores that can hold per-object locks,
// for senders with serialize: deliveries of different events about one
// business object (an order) never run at the site together. An object is
// named by a scope (several senders may share one) and the object's key.
// Like a claim, a lock has an owner token and a lease judged by the
// store's clock; every write is fenced by the owner. Every backend
// implements it (checked by dedupetest.RunObjectConformance); it is an
// interface of its own so that a Store decorator passes it on explicitly.
type ObjectLocker interface {
	// LockObject takes (scope, object) for owner for lease when it is
	// free, its holder's lease has expired, or owner holds it already (the
	// lease is then extended). It reports whether owner holds the object
	// now; when it does not, nothing is written.
	LockObject(ctx context.Context, scope, object, owner string, lease time.Duration) (bool, error)
	// RenewObject extends owner's lease to lease from now; ErrNotOwner when
	// owner no longer holds the object (it was freed, or taken after the
	// lease expired).
	RenewObject(ctx context.Context, scope, object, owner string, lease time.Duration) error
	// UnlockObject frees the object if owner holds it (an expired lease
	// that no one took since still counts); ErrNotOwner otherwise, and
	// nothing is written. Stores that are Notifiers announce it as a change
	// of (ObjectSender(scope), object).
	UnlockObject(ctx context.Context, scope, object, owner string) error
}

// ObjectSender is the sender under which a Notifier announces that an
// object of scope was freed: WaitChange(ctx, ObjectSender(scope), object).
// No configured sender can have this name (sender names may not contain
// ':').
func ObjectSender(scope string) string { return "hookonce:object:" + scope }

// ConfirmedReader is implemented by stores whose reads may see a write
// that is not durable yet: PostgreSQL under synchronous replication, where
// a commit whose wait for the standby was cancelled (its caller's timeout)
// stays on the primary alone, visible to every read there, and is gone
// after a failover. GetConfirmed is Get, answered only once the store has
// made sure that everything the read saw is as durable as an acknowledged
// commit (a write of its own, ordered after it, acknowledged). When it
// cannot (that write timed out or was cancelled too) it answers an error
// wrapping ErrUnavailable, and what the caller wanted to know is unknown.
// The proxy reads with it, where there is one, to tell whether a
// completion whose reply was lost was stored (ARCHITECTURE trap 35).
type ConfirmedReader interface {
	GetConfirmed(ctx context.Context, sender, key string) (Record, error)
}

// Notifier is implemented by stores that can announce changes of a key, so
// that deliveries waiting on a processing claim wake at once instead of on
// their next poll.
type Notifier interface {
	// WaitChange blocks until (sender, key) may have changed state or ctx is
	// done. Spurious wake-ups are allowed.
	WaitChange(ctx context.Context, sender, key string) error
}
