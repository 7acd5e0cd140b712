package dynamo

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// gatedBatches answers BatchExecuteStatement once a test lets each
// request through, with a scripted error code per statement (by its sk),
// and records each request's sks.
type gatedBatches struct {
	API
	gate  chan struct{}
	codes map[string]types.BatchStatementErrorCodeEnum
	fail  error

	mu    sync.Mutex
	sent  [][]string
	calls int
}

func (f *gatedBatches) BatchExecuteStatement(_ context.Context, in *dynamodb.BatchExecuteStatementInput, _ ...func(*dynamodb.Options)) (*dynamodb.BatchExecuteStatementOutput, error) {
	f.mu.Lock()
	f.calls++
	f.mu.Unlock()
	<-f.gate
	var sks []string
	out := &dynamodb.BatchExecuteStatementOutput{}
	for _, st := range in.Statements {
		sk := skParam(st)
		sks = append(sks, sk)
		var r types.BatchStatementResponse
		if c := f.codes[sk]; c != "" {
			r.Error = &types.BatchStatementError{Code: c, Message: aws.String("scripted")}
		}
		out.Responses = append(out.Responses, r)
	}
	f.mu.Lock()
	f.sent = append(f.sent, sks)
	f.mu.Unlock()
	if f.fail != nil {
		return nil, f.fail
	}
	return out, nil
}

func (f *gatedBatches) started() int { f.mu.Lock(); defer f.mu.Unlock(); return f.calls }

// Inserts made while batchSenders batches are in flight go together in
// the next one, sent by the first of them once a batch before is
// answered; a record twice in one batch goes once (the other insert is
// told so at once); a statement's error, or the request's, is its
// insert's.
func TestInsertGroup(t *testing.T) {
	t.Parallel()
	item := func(sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{attrPK: sv("P"), attrSK: sv(sk)}
	}
	inFlight := make([]string, batchSenders) // sent at once, each alone
	var alone [][]string
	for i := range inFlight {
		inFlight[i] = fmt.Sprintf("a%d", i)
		alone = append(alone, []string{inFlight[i]})
	}
	cases := []struct {
		name   string
		queued []string // inserted while the first batches are in flight
		codes  map[string]types.BatchStatementErrorCodeEnum
		fail   error
		cancel string           // a queued insert whose context ends while it waits
		next   []string         // the batch after those
		errs   map[string]error // by name; nil: written
	}{
		{name: "a sender for each while there are few"},
		{name: "the waiting go together", queued: []string{"b", "c", "d"}, next: []string{"b", "c", "d"}},
		{name: "a record twice", queued: []string{"b", "b", "c"}, next: []string{"b", "c"}, errs: map[string]error{"b#2": errSameKeyInBatch}},
		{name: "a statement's error", queued: []string{"b"}, codes: map[string]types.BatchStatementErrorCodeEnum{"b": types.BatchStatementErrorCodeEnumDuplicateItem},
			next: []string{"b"}, errs: map[string]error{"b": errors.New("DuplicateItem")}},
		{name: "a waiting caller whose context ends leaves", queued: []string{"b", "c", "d"}, cancel: "c",
			next: []string{"b", "d"}, errs: map[string]error{"c": context.Canceled}},
		{name: "the first waiting caller leaves, the next sends", queued: []string{"b", "c", "d"}, cancel: "b",
			next: []string{"c", "d"}, errs: map[string]error{"b": context.Canceled}},
		{name: "the request's error", fail: errors.New("boom"),
			errs: map[string]error{"a0": errBatchFailed, "a1": errBatchFailed, "a2": errBatchFailed, "a3": errBatchFailed}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := &gatedBatches{gate: make(chan struct{}), codes: tc.codes, fail: tc.fail}
			s := New(db, "T")
			got := map[string]error{}
			var mu sync.Mutex
			var wg sync.WaitGroup
			insert := func(ctx context.Context, name, sk string) chan struct{} {
				wg.Add(1)
				answered := make(chan struct{})
				go func() {
					defer wg.Done()
					it := item(sk)
					err := s.firstClaims.write(ctx, s, "j", itemKey(it), InsertStatement(s.table, it))
					mu.Lock()
					got[name] = err
					mu.Unlock()
					close(answered)
				}()
				return answered
			}
			for _, sk := range inFlight {
				insert(context.Background(), sk, sk)
			}
			for db.started() < batchSenders { // every sender's batch is in flight
				runtime.Gosched()
			}
			seen, waiting := map[string]int{}, 0
			for _, sk := range tc.queued {
				seen[sk]++
				name := sk
				if seen[sk] > 1 {
					name = fmt.Sprintf("%s#%d", sk, seen[sk])
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				answered := insert(ctx, name, sk)
				waiting++
				for pending(s) < waiting { // it waits behind them
					runtime.Gosched()
				}
				if name == tc.cancel {
					cancel()
					<-answered // it left without its batch
					if waiting--; pending(s) != waiting {
						t.Fatalf("%d writes waiting after %s left, want %d", pending(s), name, waiting)
					}
				}
			}
			close(db.gate)
			wg.Wait()
			want := alone
			if tc.next != nil {
				want = append(slices.Clone(alone), tc.next)
			}
			sent := slices.Clone(db.sent)
			slices.SortFunc(sent, func(x, y []string) int { return strings.Compare(x[0], y[0]) })
			if fmt.Sprint(sent) != fmt.Sprint(want) {
				t.Errorf("batches %v, want %v", sent, want)
			}
			if len(got) != len(inFlight)+len(tc.queued) {
				t.Errorf("%d inserts answered, want %d", len(got), len(inFlight)+len(tc.queued))
			}
			for name, err := range got {
				want := tc.errs[name]
				switch {
				case want == nil && err != nil:
					t.Errorf("insert %s: %v, want written", name, err)
				case want != nil && (err == nil || !errors.Is(err, want) && !strings.Contains(err.Error(), want.Error())):
					t.Errorf("insert %s: %v, want %v", name, err, want)
				}
			}
		})
	}
}

func pending(s *Store) int {
	s.firstClaims.mu.Lock()
	g := s.firstClaims.m["j"]
	s.firstClaims.mu.Unlock()
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.pending)
}

// A failed batch turns a store away from PartiQL only while none has
// succeeded on it: a later failure is the endpoint's for a while
// (throttling, a server error), not its want of PartiQL.
func TestPartiQLTurnedAwayOnlyBeforeItWorked(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		worked bool                                         // a batch was answered before the one that fails
		codes  map[string]types.BatchStatementErrorCodeEnum // that batch's statements' errors
		want   bool                                         // off PartiQL after it
	}{
		{"an endpoint that never ran one", false, nil, true},
		{"an endpoint that ran one", true, nil, false},
		{"an endpoint whose statement was refused by its item", true,
			map[string]types.BatchStatementErrorCodeEnum{"a": types.BatchStatementErrorCodeEnumConditionalCheckFailed}, false},
		{"an endpoint that took a batch but ran none of it", true,
			map[string]types.BatchStatementErrorCodeEnum{"a": types.BatchStatementErrorCodeEnumInternalServerError}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := &gatedBatches{gate: make(chan struct{}), codes: tc.codes}
			close(db.gate)
			s := New(db, "T")
			write := func(sk string) error {
				it := map[string]types.AttributeValue{attrPK: sv("P"), attrSK: sv(sk)}
				err := s.firstClaims.write(context.Background(), s, "j", itemKey(it), InsertStatement(s.table, it))
				s.noteBatchFailed(err)
				return err
			}
			if tc.worked {
				if err := write("a"); (err != nil) != (tc.codes != nil) {
					t.Fatalf("first write: %v", err)
				}
			}
			db.fail = errors.New("InternalServerError")
			if err := write("b"); !errors.Is(err, errBatchFailed) {
				t.Fatalf("write: %v, want errBatchFailed", err)
			}
			if got := s.partiQLOff(); got != tc.want {
				t.Errorf("off PartiQL %v, want %v", got, tc.want)
			}
		})
	}
}

// A store turned away from PartiQL tries it again once partiQLRetry has
// passed: one caller does, the others wait another while; if its batch
// runs, the store writes PartiQL again, and if it fails, the wait starts
// over. A cold endpoint's first failure does not keep the store away for
// good.
func TestPartiQLTriedAgainAfterAWhile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		fails   bool // the endpoint still fails the batch that tries again
		wantOff bool // off PartiQL after that batch
	}{
		{"the endpoint runs PartiQL now", false, false},
		{"the endpoint still cannot", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := &gatedBatches{gate: make(chan struct{})}
			close(db.gate)
			now := time.Unix(1_000_000, 0)
			s := New(db, "T")
			s.now = func() time.Time { return now }
			write := func(sk string) error {
				it := map[string]types.AttributeValue{attrPK: sv("P"), attrSK: sv(sk)}
				err := s.firstClaims.write(context.Background(), s, "j", itemKey(it), InsertStatement(s.table, it))
				s.noteBatchFailed(err)
				return err
			}
			db.fail = errors.New("InternalServerError")
			if err := write("a"); !errors.Is(err, errBatchFailed) {
				t.Fatalf("write: %v, want errBatchFailed", err)
			}
			now = now.Add(partiQLRetry - time.Second)
			if !s.partiQLOff() {
				t.Fatal("back on PartiQL before partiQLRetry passed")
			}
			now = now.Add(time.Second)
			if s.partiQLOff() {
				t.Fatal("still off PartiQL once partiQLRetry passed: the first caller should try it")
			}
			if !s.partiQLOff() {
				t.Fatal("a second caller tries PartiQL too: want it to wait while the first tries")
			}
			if !tc.fails {
				db.fail = nil
			}
			// The retry's batch answers half a wait later: a failure
			// starts a whole wait from then, past the one the retry set.
			now = now.Add(partiQLRetry / 2)
			if err := write("b"); (err != nil) != tc.fails {
				t.Fatalf("write: %v, want failed %v", err, tc.fails)
			}
			now = now.Add(partiQLRetry/2 + time.Second)
			if got := s.partiQLOff(); got != tc.wantOff {
				t.Errorf("off PartiQL %v, want %v", got, tc.wantOff)
			}
		})
	}
}
