// Package faults injects AWS failures into an aws-sdk-go-v2 client so that
// integration tests, the local runner and chaos runs see the failures AWS
// produces: throttles, 5xx, transaction conflicts, and responses lost after
// the server applied the request.
//
// The injector sits at the bottom of the Deserialize step, where the HTTP
// client would be called. That position is inside the SDK's retry loop, so
// every attempt, the SDK's own retries included, is a chance for a fault,
// and the retryer's attempt limit and retry budget apply as on AWS. Error
// faults are not built as Go errors: the injector answers the attempt with
// the HTTP response AWS would have sent (status, headers, JSON or XML
// body), and the SDK's own deserializer turns that into the error. The code
// under test therefore gets the same types (*types.TransactionCanceledException
// with its CancellationReasons, *types.ThrottlingException, ...) wrapped the
// same way (*awshttp.ResponseError, *retry.MaxAttemptsError,
// *smithy.OperationError) as from AWS, and the retryer classifies them by
// the same codes and status codes.
//
// Usage:
//
//	inj := faults.New(1, faults.Chaos()...)
//	inj.Install(&cfg) // before the clients are made from cfg
//	inj.SetEnabled(false)
//	setUp()
//	inj.SetEnabled(true)
//	run()
//	t.Log(inj)
package faults

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/batchwork/batchwork/shared/awswire"
)

// Kind is a kind of fault.
type Kind string

const (
	// Conflict is a transaction conflict, without sending the request. On
	// DynamoDB TransactWriteItems it is a TransactionCanceledException with
	// one CancellationReason per TransactItems element, TransactionConflict
	// on one of them and None on the others. On DynamoDB UpdateItem, PutItem
	// and DeleteItem it is the TransactionConflictException AWS returns when
	// the item is part of a transaction in flight. The SDK retries neither.
	Conflict Kind = "conflict"
	// Throttle is the service's throttling error, without sending the
	// request: DynamoDB ProvisionedThroughputExceededException or
	// ThrottlingException, SQS RequestThrottled or ThrottlingException, S3
	// SlowDown (503). The SDK retries them as throttles.
	Throttle Kind = "throttle"
	// ServerError is a 500 or 503 from the service, without sending the
	// request. The SDK retries it by its status code.
	ServerError Kind = "5xx"
	// Lost sends the request and, when the server answered 2xx, drops the
	// response and fails the attempt with the error a connection reset
	// gives. The SDK retries it as a connection error, and the caller sees
	// what the retry gets: a condition that fails because the write
	// already applied, or DynamoDB's replay of a transaction with the same
	// ClientRequestToken. It applies to every service and operation.
	Lost Kind = "lost"
	// InProgress is DynamoDB's TransactionInProgressException on
	// TransactWriteItems (a retry with a ClientRequestToken whose first
	// attempt is still running), without sending the request. The SDK
	// retries it as a throttle.
	InProgress Kind = "inprogress"
)

// Kinds lists the kinds of fault.
var Kinds = []Kind{Conflict, Throttle, ServerError, Lost, InProgress, Duplicate}

// Rule says which attempts get which fault.
type Rule struct {
	// Service is a pattern for the service ID as awsmiddleware.GetServiceID
	// gives it ("DynamoDB", "SQS", "S3"), and Operation for the operation
	// name as awsmiddleware.GetOperationName gives it ("TransactWriteItems").
	// "" or "*" is any; otherwise path.Match globs, case-insensitive
	// ("Transact*").
	Service, Operation string
	Kind               Kind
	// Rate is the probability that a matching attempt gets the fault, 0..1.
	// Zero with Count set means every matching attempt, until Count.
	Rate float64
	// Count, when positive, stops the rule after this many faults, so a
	// test can inject exactly one.
	Count int
	// Code, when set, picks one error code of the kind ("SlowDown",
	// "ProvisionedThroughputExceededException"); the rule then applies
	// only where the kind has that code. Otherwise each fault picks one of
	// the kind's codes for the service at random.
	Code string
	// Match, when set, restricts the rule to operations whose input it
	// accepts: input is the operation's input, e.g.
	// *dynamodb.TransactWriteItemsInput. It is called once per attempt and
	// must not call the Injector.
	Match func(op string, input any) bool
}

// String formats r as Parse reads it (without Match).
func (r Rule) String() string {
	var b strings.Builder
	if !isAny(r.Service) || !isAny(r.Operation) {
		b.WriteString(orStar(r.Service))
		if !isAny(r.Operation) {
			b.WriteString("." + r.Operation)
		}
		b.WriteString(":")
	}
	b.WriteString(string(r.Kind))
	if r.Code != "" {
		b.WriteString("/" + r.Code)
	}
	b.WriteString("=" + strconv.FormatFloat(r.effectiveRate(), 'g', -1, 64))
	if r.Count > 0 {
		b.WriteString("#" + strconv.Itoa(r.Count))
	}
	if r.Match != nil {
		b.WriteString(" (with Match)")
	}
	return b.String()
}

func (r Rule) effectiveRate() float64 {
	if r.Rate == 0 && r.Count > 0 {
		return 1
	}
	return r.Rate
}

// Validate reports whether the rule can ever fire.
func (r Rule) Validate() error {
	if !validKind(r.Kind) {
		return fmt.Errorf("unknown kind %q (want one of %s)", r.Kind, kindList())
	}
	if r.Rate < 0 || r.Rate > 1 || math.IsNaN(r.Rate) {
		return fmt.Errorf("rate %v is not between 0 and 1", r.Rate)
	}
	if r.Count < 0 {
		return fmt.Errorf("count %d is negative", r.Count)
	}
	for _, p := range []string{r.Service, r.Operation} {
		if _, err := path.Match(p, ""); err != nil {
			return fmt.Errorf("bad pattern %q: %w", p, err)
		}
	}
	if !applies(r) {
		return fmt.Errorf("%s has no fault for %s (it applies to %s)", kindCode(r), target(r), scopeText(r.Kind))
	}
	return nil
}

func kindCode(r Rule) string {
	if r.Code != "" {
		return string(r.Kind) + "/" + r.Code
	}
	return string(r.Kind)
}

func target(r Rule) string { return orStar(r.Service) + "." + orStar(r.Operation) }

func orStar(s string) string {
	if s == "" {
		return "*"
	}
	return s
}

func isAny(p string) bool { return p == "" || p == "*" }

// matchPattern matches a service or operation name against a rule pattern.
func matchPattern(pat, s string) bool {
	if isAny(pat) {
		return true
	}
	ok, _ := path.Match(strings.ToLower(pat), strings.ToLower(s))
	return ok
}

func validKind(k Kind) bool {
	for _, x := range Kinds {
		if k == x {
			return true
		}
	}
	return false
}

func kindList() string {
	s := make([]string, len(Kinds))
	for i, k := range Kinds {
		s[i] = string(k)
	}
	return strings.Join(s, ", ")
}

// Injector injects faults into the clients made from the configs it is
// installed on. Its methods are safe for concurrent use, and a nil
// *Injector does nothing, so FromEnv's result can be used unchecked.
type Injector struct {
	id      string
	seed    int64
	enabled atomic.Bool

	mu     sync.Mutex
	rng    *rand.Rand
	rules  []*ruleState
	counts map[string]int
	total  int
	seq    int // numbers the injected responses' request IDs
	dup    duplicates
}

type ruleState struct {
	Rule
	fired int // faults injected or, for Lost, reserved
}

var injectors atomic.Int64

// New returns an enabled injector with the rules, drawing from a random
// source seeded with seed: given the seed and the order of the attempts,
// the faults are the same on every run. Rules are tried in order and the
// first that fires wins. New panics on a rule that cannot fire (see
// Rule.Validate), as a test's rules are fixed; Parse checks rules from
// outside.
func New(seed int64, rules ...Rule) *Injector {
	i := &Injector{
		id:     fmt.Sprintf("batchwork.faults#%d", injectors.Add(1)),
		seed:   seed,
		rng:    rand.New(rand.NewPCG(uint64(seed), 0x6261746368776f72)),
		counts: map[string]int{},
	}
	i.enabled.Store(true)
	i.Add(rules...)
	return i
}

// Add appends rules at run time, e.g. a fault for the next step of a test.
// It panics on a rule that cannot fire, as New does.
func (i *Injector) Add(rules ...Rule) {
	if i == nil {
		return
	}
	for _, r := range rules {
		if err := r.Validate(); err != nil {
			panic(fmt.Sprintf("faults: rule %s: %v", r, err))
		}
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	for _, r := range rules {
		i.rules = append(i.rules, &ruleState{Rule: r})
	}
}

// Once adds r to fire on the next matching attempt only: Count 1 and, if
// r has no rate, rate 1.
func (i *Injector) Once(r Rule) {
	r.Count = 1
	if r.Rate == 0 {
		r.Rate = 1
	}
	i.Add(r)
}

// Seed returns the seed, to reproduce a run.
func (i *Injector) Seed() int64 {
	if i == nil {
		return 0
	}
	return i.seed
}

// SetEnabled switches injection on or off, e.g. off while a test sets up.
func (i *Injector) SetEnabled(on bool) {
	if i == nil {
		return
	}
	i.enabled.Store(on)
}

// Enabled reports whether injection is on.
func (i *Injector) Enabled() bool { return i != nil && i.enabled.Load() }

// Counts returns the faults injected so far by "Service.Operation kind",
// e.g. "DynamoDB.TransactWriteItems conflict".
func (i *Injector) Counts() map[string]int {
	out := map[string]int{}
	if i == nil {
		return out
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	for k, v := range i.counts {
		out[k] = v
	}
	return out
}

// Total returns the number of faults injected so far.
func (i *Injector) Total() int {
	if i == nil {
		return 0
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.total
}

// String returns the seed, the rules and the faults injected, as a short
// table for test logs.
func (i *Injector) String() string {
	if i == nil {
		return "faults: off"
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	var b strings.Builder
	state := "on"
	if !i.enabled.Load() {
		state = "off"
	}
	fmt.Fprintf(&b, "faults: seed %d, %s, %d injected\n", i.seed, state, i.total)
	for _, r := range i.rules {
		fmt.Fprintf(&b, "  rule %s (fired %d)\n", r.Rule, r.fired)
	}
	keys := make([]string, 0, len(i.counts))
	for k := range i.counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	for _, k := range keys {
		fmt.Fprintf(tw, "  %s\t%d\n", k, i.counts[k])
	}
	_ = tw.Flush()
	return strings.TrimSuffix(b.String(), "\n")
}

// inputKey keys the operation input in the stack values, for Match and for
// the size of a TransactionCanceledException.
type inputKey struct{}

const inputMiddlewareID = "batchwork.faults.input"

// Install adds the injector to cfg's API options, and to the lean
// clients' hooks (DynamoDB and SQS), so clients made from cfg afterwards are subject
// to it. Installing the same injector twice on one
// config is harmless; several injectors can be installed on one config.
func (i *Injector) Install(cfg *aws.Config) {
	if i == nil || cfg == nil {
		return
	}
	i.installDuplicates(*cfg)
	awswire.Install(cfg, i) // hook.go
	cfg.APIOptions = append(cfg.APIOptions, i.apiOption)
}

func (i *Injector) apiOption(st *middleware.Stack) error {
	if _, ok := st.Deserialize.Get(i.id); ok {
		return nil
	}
	// The input is known in the Initialize step only. Keeping it in the
	// stack values, which reach every later step, lets the fault itself
	// stay in the Deserialize step, once per attempt.
	if _, ok := st.Initialize.Get(inputMiddlewareID); !ok {
		capture := middleware.InitializeMiddlewareFunc(inputMiddlewareID,
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				return next.HandleInitialize(middleware.WithStackValue(ctx, inputKey{}, in.Parameters), in)
			})
		if err := st.Initialize.Add(capture, middleware.After); err != nil {
			return fmt.Errorf("faults: add input capture: %w", err)
		}
	}
	if err := i.duplicateStep(st); err != nil {
		return fmt.Errorf("faults: add duplicate delivery: %w", err)
	}
	// Last in the Deserialize step is innermost: below the operation
	// deserializer and the response error wrapper, where the HTTP client
	// is called, and so once per attempt inside the Finalize step's retry
	// loop.
	if err := st.Deserialize.Add(&attemptMiddleware{i}, middleware.After); err != nil {
		return fmt.Errorf("faults: add injector: %w", err)
	}
	return nil
}

type attemptMiddleware struct{ inj *Injector }

func (m *attemptMiddleware) ID() string { return m.inj.id }

func (m *attemptMiddleware) HandleDeserialize(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	inj := m.inj
	req, ok := in.Request.(*smithyhttp.Request)
	if !inj.enabled.Load() || !ok {
		return next.HandleDeserialize(ctx, in)
	}
	svc, op := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx)
	f, ok := inj.decide(svc, op, middleware.GetStackValue(ctx, inputKey{}))
	if !ok {
		return next.HandleDeserialize(ctx, in)
	}
	if f.kind == Lost {
		return inj.lose(ctx, in, next, req, f)
	}
	// Answer as the service would have, without sending: the deserializer
	// above turns this into the API error.
	return middleware.DeserializeOutput{RawResponse: f.resp.build(req)}, middleware.Metadata{}, nil
}

// fault is one decided injection.
type fault struct {
	rule *ruleState
	kind Kind
	key  string
	resp response // for the kinds answered without sending
}

// decide picks the fault, if any, for one attempt. Count and totals are
// updated here, under the lock, so a Count-limited rule fires exactly
// Count times however many attempts run at once.
func (i *Injector) decide(svc, op string, input any) (fault, bool) {
	i.mu.Lock()
	rules := append([]*ruleState(nil), i.rules...)
	i.mu.Unlock()

	// Match is the caller's code: run it without the lock.
	cands := rules[:0]
	for _, r := range rules {
		if !matchPattern(r.Service, svc) || !matchPattern(r.Operation, op) {
			continue
		}
		if r.Kind == Duplicate || (len(variants(r.Kind, svc, op, r.Code)) == 0 && r.Kind != Lost) {
			continue // Duplicate fires after the operation: duplicateStep
		}
		if r.Match != nil && !r.Match(op, input) {
			continue
		}
		cands = append(cands, r)
	}
	if len(cands) == 0 {
		return fault{}, false
	}

	i.mu.Lock()
	defer i.mu.Unlock()
	for _, r := range cands {
		if r.Count > 0 && r.fired >= r.Count {
			continue
		}
		if rate := r.effectiveRate(); rate < 1 && i.rng.Float64() >= rate {
			continue
		}
		r.fired++
		f := fault{rule: r, kind: r.Kind, key: svc + "." + op + " " + string(r.Kind)}
		if r.Kind == Lost {
			// Counted once the server has answered 2xx; see lose.
			return f, true
		}
		i.seq++
		f.resp = i.respond(svc, op, r, input)
		i.counts[f.key]++
		i.total++
		return f, true
	}
	return fault{}, false
}

// lose sends the attempt and, if the service answered 2xx, drops the
// response and returns what smithy's HTTP client handler returns for a
// connection reset while reading the response: an empty response and a
// *smithyhttp.RequestSendError around the *url.Error. The retryer retries
// that (RetryableConnectionError: ConnectionError() is true) and the
// response error wrapper wraps it, as for a real reset.
func (i *Injector) lose(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler, req *smithyhttp.Request, f fault) (
	middleware.DeserializeOutput, middleware.Metadata, error,
) {
	out, md, err := next.HandleDeserialize(ctx, in)
	resp, ok := out.RawResponse.(*smithyhttp.Response)
	if err != nil || !ok || resp.StatusCode < 200 || resp.StatusCode > 299 {
		// Nothing applied, or not known to be: not a lost success.
		i.mu.Lock()
		f.rule.fired--
		i.mu.Unlock()
		return out, md, err
	}
	discard(resp.Body)

	i.mu.Lock()
	i.counts[f.key]++
	i.total++
	i.mu.Unlock()

	empty := &smithyhttp.Response{Response: &http.Response{Header: http.Header{}, Body: http.NoBody}}
	return middleware.DeserializeOutput{RawResponse: empty}, md, &smithyhttp.RequestSendError{Err: resetError(req)}
}

// discard reads a little of the body, so a small response leaves the
// connection reusable, and closes it.
func discard(body io.ReadCloser) {
	if body == nil {
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	_ = body.Close()
}

// resetError is the error net/http returns when the peer resets the
// connection while the response is read. The source address names the
// injector, so a log shows the reset was not real.
func resetError(req *smithyhttp.Request) error {
	host := ""
	u := ""
	if req.URL != nil {
		host = req.URL.Host
		u = req.URL.String()
	}
	method := req.Method
	if method == "" {
		method = http.MethodGet
	}
	return resetURLError(method, host, u)
}

func resetURLError(method, host, u string) error {
	return &url.Error{
		Op:  method[:1] + strings.ToLower(method[1:]),
		URL: u,
		Err: &net.OpError{
			Op:     "read",
			Net:    "tcp",
			Source: addr("fault-injector"),
			Addr:   addr(host),
			Err:    os.NewSyscallError("read", syscall.ECONNRESET),
		},
	}
}

type addr string

func (a addr) Network() string { return "tcp" }
func (a addr) String() string  { return string(a) }
