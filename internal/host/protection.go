package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/batchwork/batchwork/internal/executor/feed"
)

// EnvECSAgentURI is the ECS agent endpoint's address, which the agent
// gives every container of an ECS task (Fargate included) and nothing
// else does.
const EnvECSAgentURI = "ECS_AGENT_URI"

// Task scale-in protection: while a slot runs a task, the container asks
// ECS not to stop it for a scale-in or a deployment (ECS task scale-in
// protection, through the agent's $ECS_AGENT_URI/task-protection/v1/state).
// The service scales on the ready queues' backlog (infra/batchwork
// fargate.go), which shrinks as tasks finish: without protection, ECS
// would stop any task, busy or not, and a running task longer than the
// drain would be lost and retried. A deployment, too, waits for its
// protected tasks to go idle (or for the protection to lapse) before it
// stops them.
//
// Requests are few: one when the first slot becomes busy, one renewal
// every protectFor-renewBefore while any stays busy, and one when every
// slot has been idle for idleGrace (so tasks that follow each other keep
// the protection without a request each). A failed request is logged and
// retried with backoff; it never stops the host, which then runs as
// without protection (a scale-in stops it, and it drains).
const (
	// protectFor is the protection each request asks for. If the
	// process dies protected, ECS lifts it after this long.
	protectFor = 15 * time.Minute
	// renewBefore is how long before its expiry a protection is renewed.
	renewBefore = 5 * time.Minute
	// idleGrace is how long every slot must stay idle before the
	// protection is lifted.
	idleGrace = 30 * time.Second
	// protectTick is how often the protector checks for renewals and the
	// end of the idle grace.
	protectTick = 10 * time.Second
	// protectRetry is the first delay after a failed request, doubled
	// up to protectMaxRetry.
	protectRetry    = 30 * time.Second
	protectMaxRetry = 10 * time.Minute
	// protectTimeout bounds one request (the agent calls ECS).
	protectTimeout = 15 * time.Second
)

// protector keeps the container protected from scale-in while any slot
// runs a task. TaskStarted and TaskEnded (feed.Poller's Activity) only
// count and wake run, which makes the requests.
type protector struct {
	url    string // $ECS_AGENT_URI/task-protection/v1/state
	client *http.Client
	log    *slog.Logger
	now    func() time.Time
	wake   chan struct{}

	mu        sync.Mutex
	busy      int       // slots running a task
	idleSince time.Time // when busy last fell to 0

	// Owned by step (run's goroutine).
	until   time.Time     // the protection's expiry as last set; zero or past: off
	retryAt time.Time     // no request before this, after a failure
	backoff time.Duration // the next failure's delay
}

// startProtection protects the container from scale-in while a slot runs
// a task, on ECS, until stop; outside ECS it returns a nil Activity.
func startProtection(log *slog.Logger) (a feed.Activity, stop func()) {
	p := newProtector(os.Getenv, &http.Client{Timeout: protectTimeout}, log, time.Now)
	if p == nil {
		return nil, func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	tick := time.NewTicker(protectTick)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.run(ctx, tick.C)
	}()
	log.Info("scale-in protection while tasks run", "agent", p.url)
	return p, func() {
		cancel()
		tick.Stop()
		<-done
	}
}

// newProtector is nil when ECS_AGENT_URI is not set: outside ECS (the
// local runner, a test) there is nothing to protect.
func newProtector(getenv func(string) string, client *http.Client, log *slog.Logger, now func() time.Time) *protector {
	uri := strings.TrimRight(getenv(EnvECSAgentURI), "/")
	if uri == "" {
		return nil
	}
	return &protector{url: uri + "/task-protection/v1/state", client: client, log: log, now: now, wake: make(chan struct{}, 1)}
}

// TaskStarted records a slot starting a task; the first wakes run, which
// protects the container at once.
func (p *protector) TaskStarted() {
	p.mu.Lock()
	p.busy++
	first := p.busy == 1
	p.mu.Unlock()
	if first {
		p.nudge()
	}
}

// TaskEnded records a slot's task ending.
func (p *protector) TaskEnded() {
	p.mu.Lock()
	p.busy--
	if p.busy == 0 {
		p.idleSince = p.now()
	}
	p.mu.Unlock()
}

func (p *protector) nudge() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// run makes the requests until ctx ends: at once when the first slot
// becomes busy, and on each tick.
func (p *protector) run(ctx context.Context, tick <-chan time.Time) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-tick:
		}
		p.step(ctx)
	}
}

// step sets or lifts the protection if the slots' state calls for it.
func (p *protector) step(ctx context.Context) {
	now := p.now()
	p.mu.Lock()
	want := p.busy > 0 || (!p.idleSince.IsZero() && now.Sub(p.idleSince) < idleGrace)
	busy := p.busy
	p.mu.Unlock()
	if now.Before(p.retryAt) {
		return
	}
	on := now.Before(p.until)
	switch {
	case want && (!on || !now.Before(p.until.Add(-renewBefore))):
		if err := p.put(ctx, true); err != nil {
			p.failed(ctx, now, "set", err, busy)
			return
		}
		p.until = now.Add(protectFor)
		p.backoff = 0
		if on {
			p.log.Debug("scale-in protection renewed", "until", p.until, "busy_slots", busy)
		} else {
			p.log.Info("scale-in protection on", "until", p.until, "busy_slots", busy)
		}
	case !want && on:
		if err := p.put(ctx, false); err != nil {
			p.failed(ctx, now, "lift", err, busy)
			return
		}
		p.until = time.Time{}
		p.backoff = 0
		p.log.Info("scale-in protection off: every slot idle", "idle_for", now.Sub(p.idleSince))
	}
}

func (p *protector) failed(ctx context.Context, now time.Time, what string, err error, busy int) {
	if ctx.Err() != nil {
		return // the host is done
	}
	p.backoff = min(max(2*p.backoff, protectRetry), protectMaxRetry)
	p.retryAt = now.Add(p.backoff)
	p.log.Warn("scale-in protection: "+what+" failed; the executor runs on, and retries", "err", err, "busy_slots", busy, "retry_in", p.backoff)
}

// protectionResponse is the agent's answer: the task's protection, or
// ECS's failure for the task, or the agent's error.
type protectionResponse struct {
	Protection *struct {
		ProtectionEnabled bool
	} `json:"protection"`
	Failure *struct {
		Arn, Reason, Detail string
	} `json:"failure"`
	Error *struct {
		Code, Message string
	} `json:"error"`
}

// put asks the agent for protection (for protectFor) or its end.
func (p *protector) put(ctx context.Context, enabled bool) error {
	body := map[string]any{"ProtectionEnabled": enabled}
	if enabled {
		body["ExpiresInMinutes"] = int(protectFor / time.Minute)
	}
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, protectTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, p.url, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return err
	}
	var r protectionResponse
	_ = json.Unmarshal(raw, &r) // judged below: a body that is none of these is an error
	switch {
	case r.Error != nil:
		return fmt.Errorf("agent: %s %s: %s", resp.Status, r.Error.Code, r.Error.Message)
	case r.Failure != nil:
		// A 200 carrying ECS's failure, e.g. TASK_NOT_VALID for a task
		// that no service runs.
		return fmt.Errorf("ECS: %s: %s", r.Failure.Reason, r.Failure.Detail)
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("agent: %s: %.200s", resp.Status, raw)
	case r.Protection == nil:
		return fmt.Errorf("agent: no protection in the response: %.200s", raw)
	case r.Protection.ProtectionEnabled != enabled:
		return fmt.Errorf("agent: protection is %t, asked for %t", r.Protection.ProtectionEnabled, enabled)
	}
	return nil
}
