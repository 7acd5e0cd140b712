package dynamo

// Writes batched by group commit (the first claims of firstclaim.go, the
// commits of commitbatch.go).

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// errSameKeyInBatch: another write of the same record is in the batch
// being formed (racing first claims of one task in one process); this one
// is its caller's to write another way, which races that write.
var errSameKeyInBatch = errors.New("a write of the same record is in the batch")

// errBatchFailed: the BatchExecuteStatement itself failed (no statement's
// outcome is known).
var errBatchFailed = errors.New("the batch of writes failed")

// stmtGroups batches the writes its callers make at once, by job: a
// batch's request is counted as its sender's job's cost
// (shared/cost/meter), so a batch holds one job's writes only. A job's
// group lives while a caller is in it. Each write is one PartiQL
// statement on one record, which must hold on its own: a statement that
// fails is its caller's to write another way.
type stmtGroups struct {
	mu sync.Mutex
	m  map[string]*stmtGroup
}

func (gs *stmtGroups) write(ctx context.Context, s *Store, job, key string, stmt types.BatchStatementRequest) error {
	gs.mu.Lock()
	g := gs.m[job]
	if g == nil {
		if gs.m == nil {
			gs.m = map[string]*stmtGroup{}
		}
		g = &stmtGroup{}
		gs.m[job] = g
	}
	g.users++
	gs.mu.Unlock()
	err := g.write(ctx, s, key, stmt)
	gs.mu.Lock()
	if g.users--; g.users == 0 {
		delete(gs.m, job)
	}
	gs.mu.Unlock()
	return err
}

// stmtGroup batches one job's writes.
type stmtGroup struct {
	mu      sync.Mutex
	pending []*groupedStmt
	senders int // callers sending a batch, at most batchSenders
	users   int // callers in write (stmtGroups.mu)
}

// batchSenders bounds a job's batches in flight at once in a process: one,
// so the writes made while a batch is out wait for it and go together in
// the next. On the emulator's no-op job (16 slots) one batch in flight made
// 0.96 requests a task and 650 µs of CPU, two made 1.27 and 760 µs, at the
// same rate; a Lambda invocation's up to ten claims take two requests.
const batchSenders = 1

type groupedStmt struct {
	key   string // the record's: a batch writes a record once
	stmt  types.BatchStatementRequest
	taken bool          // in a batch: its outcome comes on done
	done  chan error    // the statement's outcome (buffered)
	lead  chan struct{} // a sender's turn may be free (buffered)
}

// write runs stmt, a write of the record key, in a batch with the
// writes other callers make meanwhile: nil once it applied. A caller
// whose context ends while it waits for a batch leaves, unwritten, as its
// UpdateItem would have; once its statement is in a batch it cannot leave
// (the batch's sender answers every statement in it, and on its way out
// wakes the first waiting caller to send the next): the wait is then a
// request's, bounded by the client's own timeouts.
func (g *stmtGroup) write(ctx context.Context, s *Store, key string, stmt types.BatchStatementRequest) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	r := &groupedStmt{key: key, stmt: stmt, done: make(chan error, 1), lead: make(chan struct{}, 1)}
	g.mu.Lock()
	g.pending = append(g.pending, r)
	for !r.taken && g.senders >= batchSenders {
		g.mu.Unlock()
		select {
		case <-r.lead:
		case <-ctx.Done():
		}
		g.mu.Lock()
		if !r.taken && ctx.Err() != nil {
			g.pending = slices.DeleteFunc(g.pending, func(q *groupedStmt) bool { return q == r })
			// The turn a sender handed r on its way out may be r's to
			// hand on: a turn lost would leave the others waiting.
			if len(g.pending) > 0 && g.senders < batchSenders {
				g.pending[0].wake()
			}
			g.mu.Unlock()
			return ctx.Err()
		}
	}
	if r.taken {
		g.mu.Unlock()
		return <-r.done
	}
	g.senders++
	batch := g.take(r)
	g.mu.Unlock()
	s.sendBatch(ctx, batch)
	g.mu.Lock()
	g.senders--
	if len(g.pending) > 0 {
		select {
		case g.pending[0].lead <- struct{}{}:
		default: // woken already
		}
	}
	g.mu.Unlock()
	return <-r.done
}

// take moves the next batch out of pending (g.mu held): r, then up to
// MaxBatchStatements-1 more from the front, each record once; a second
// insert of a record in the batch is answered errSameKeyInBatch at once.
func (g *stmtGroup) take(r *groupedStmt) []*groupedStmt {
	batch := []*groupedStmt{r}
	r.taken = true
	in := map[string]bool{r.key: true}
	rest := g.pending[:0]
	for _, q := range g.pending {
		switch {
		case q == r:
		case len(batch) == MaxBatchStatements:
			rest = append(rest, q)
		case in[q.key]:
			q.taken = true
			q.done <- errSameKeyInBatch
			q.wake()
		default:
			q.taken = true
			in[q.key] = true
			batch = append(batch, q)
			q.wake()
		}
	}
	clear(g.pending[len(rest):])
	g.pending = rest
	return batch
}

// wake lets a waiting caller see that its insert was taken.
func (q *groupedStmt) wake() {
	select {
	case q.lead <- struct{}{}:
	default:
	}
}

// sendBatch sends batch as one BatchExecuteStatement and answers each
// write in it.
func (s *Store) sendBatch(ctx context.Context, batch []*groupedStmt) {
	stmts := make([]types.BatchStatementRequest, len(batch))
	for i, r := range batch {
		stmts[i] = r.stmt
	}
	out, err := s.db.BatchExecuteStatement(ctx, &dynamodb.BatchExecuteStatementInput{Statements: stmts})
	if err == nil {
		s.notePartiQLRan(out)
	}
	for i, r := range batch {
		switch {
		case err != nil:
			r.done <- fmt.Errorf("%w: %w", errBatchFailed, err)
		case i >= len(out.Responses):
			r.done <- fmt.Errorf("batch: %d answers to %d statements", len(out.Responses), len(stmts))
		case out.Responses[i].Error != nil:
			e := out.Responses[i].Error
			r.done <- fmt.Errorf("statement: %s: %s", e.Code, aws.ToString(e.Message))
		default:
			r.done <- nil
		}
	}
}

// noteBatchFailed turns this store's writes away from PartiQL when a
// batch's request failed other than by its context (the batch ran under
// its sender's, which may be another caller's): an endpoint that cannot
// run PartiQL, as materialization finds it (puttasks.go).
func (s *Store) noteBatchFailed(err error) {
	if errors.Is(err, errBatchFailed) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		s.partiQLFailed()
	}
}

// partiQLRetry is how long a store that failed a PartiQL batch before
// any statement ran on it writes without PartiQL before trying it again.
const partiQLRetry = time.Minute

// partiQLFailed turns this store's writes away from PartiQL for a while
// (partiQLRetry), unless a PartiQL batch has succeeded on it. An endpoint
// that cannot run PartiQL (moto's DynamoDB answers it with a server
// error) fails every one, and costs a failed batch a while; an endpoint
// that ran one fails a later one only for a while (throttling, a server
// error, a reset connection), and turning away would cost each claim and
// commit a request of its own, and each chunk twice its write units. A
// first batch's failure on a cold endpoint looks like the former, so the
// wait ends: the store does not stay away from PartiQL for the rest of
// the process's life.
func (s *Store) partiQLFailed() {
	if !s.partiQLWorks.Load() {
		s.partiQLOffUntil.Store(s.clock().Add(partiQLRetry).UnixNano())
		if s.partiQLWorks.Load() { // a batch of another job's ran meanwhile
			s.partiQLOffUntil.Store(0)
		}
	}
}

// partiQLOff says whether a write goes without PartiQL now. Once the wait
// is over, one caller tries PartiQL again and the others wait another
// while: its batch either runs (notePartiQLRan ends the wait) or fails
// (partiQLFailed starts another).
func (s *Store) partiQLOff() bool {
	until := s.partiQLOffUntil.Load()
	if until == 0 {
		return false
	}
	now := s.clock().UnixNano()
	if now < until {
		return true
	}
	return !s.partiQLOffUntil.CompareAndSwap(until, now+int64(partiQLRetry))
}

func (s *Store) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

// notePartiQLRan notes that out's batch ran a statement: one succeeded or
// was refused by its item (an answer of errors only, such as an endpoint
// that takes the request but no statement, shows nothing).
func (s *Store) notePartiQLRan(out *dynamodb.BatchExecuteStatementOutput) {
	for _, r := range out.Responses {
		if r.Error == nil || r.Error.Code == types.BatchStatementErrorCodeEnumDuplicateItem ||
			r.Error.Code == types.BatchStatementErrorCodeEnumConditionalCheckFailed {
			s.partiQLWorks.Store(true)
			s.partiQLOffUntil.Store(0)
			return
		}
	}
}
