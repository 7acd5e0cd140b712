package loadmodel

// Deferred accounting. The bench's CPU figure is the framework's: the
// recorder is the bench's instrument, which Lambda never runs, and its
// accounting of a DynamoDB request (keys, sizes, units) cost about 7% of a
// no-op task's CPU, under one lock that every executor slot takes. While
// Defer is on, a DynamoDB request is only queued; the next Snapshot or
// Reset accounts for the queue in order, outside the bench's window.

// maxDeferred bounds the queue (a few KB a request: its input and answer);
// past it requests are accounted for as they come.
const maxDeferred = 200_000

// dynamoCall is a DynamoDB request recorded but not yet accounted for.
type dynamoCall struct {
	op      string
	in, out any
	err     error
}

// Defer turns deferred accounting on or off. Off accounts for the queue
// at once.
func (r *Recorder) Defer(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deferring = on
	if !on {
		r.account()
	}
}

// account accounts for the deferred requests in the order they came,
// under mu.
func (r *Recorder) account() {
	for i, c := range r.deferred {
		r.record("DynamoDB", c.op, c.in, c.out, c.err)
		r.deferred[i] = dynamoCall{} // let its input and answer go
	}
	r.deferred = r.deferred[:0]
}
