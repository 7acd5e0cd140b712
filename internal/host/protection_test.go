package host

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeAgent stands in for the ECS agent's task protection endpoint: it
// records each PUT and answers from replies in turn, a zero reply (and
// any after the last) with success.
type fakeAgent struct {
	t       *testing.T
	srv     *httptest.Server
	mu      sync.Mutex
	puts    []protectPut
	replies []agentReply
	seen    chan protectPut // each PUT, for run's test; nil otherwise
}

type protectPut struct {
	Enabled bool
	Minutes int // ExpiresInMinutes; 0 when absent
}

func (p protectPut) String() string {
	if !p.Enabled {
		return "off"
	}
	return fmt.Sprintf("on %dm", p.Minutes)
}

type agentReply struct {
	status int
	body   string
}

// The agent's answers (amazon-ecs-agent's task protection handler).
var (
	agentFailure = agentReply{http.StatusOK, `{"failure":{"Arn":"arn:aws:ecs:eu-west-1:123456789012:task/c/1","Reason":"TASK_NOT_VALID","Detail":"not in a service"}}`}
	agentError   = agentReply{http.StatusInternalServerError, `{"error":{"Code":"ServerException","Message":"Failed to find a task for the request"}}`}
	agentGarbled = agentReply{http.StatusBadGateway, `<html>bad gateway</html>`}
)

func newFakeAgent(t *testing.T, replies ...agentReply) *fakeAgent {
	a := &fakeAgent{t: t, replies: replies}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fakeAgent) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPut || r.URL.Path != "/api/container-1/task-protection/v1/state" {
		a.t.Errorf("%s %s, want PUT /api/container-1/task-protection/v1/state", r.Method, r.URL.Path)
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/json" {
		a.t.Errorf("Content-Type %q, want application/json", ct)
	}
	var body struct {
		ProtectionEnabled *bool
		ExpiresInMinutes  *int
	}
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields() // as the agent does
	if err := dec.Decode(&body); err != nil || body.ProtectionEnabled == nil {
		a.t.Errorf("request body: %v (ProtectionEnabled %v)", err, body.ProtectionEnabled)
		return
	}
	put := protectPut{Enabled: *body.ProtectionEnabled}
	if body.ExpiresInMinutes != nil {
		put.Minutes = *body.ExpiresInMinutes
	}
	a.mu.Lock()
	a.puts = append(a.puts, put)
	var reply agentReply
	if len(a.replies) > 0 {
		reply, a.replies = a.replies[0], a.replies[1:]
	}
	if reply.status == 0 { // success
		reply = agentReply{http.StatusOK, fmt.Sprintf(`{"protection":{"ExpirationDate":"2026-11-23T17:00:00Z","ProtectionEnabled":%t,"TaskArn":"arn:aws:ecs:eu-west-1:123456789012:task/c/1"}}`, put.Enabled)}
	}
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(reply.status)
	_, _ = io.WriteString(w, reply.body)
	if a.seen != nil {
		a.seen <- put
	}
}

// take returns the PUTs since the last take.
func (a *fakeAgent) take() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, p := range a.puts {
		out = append(out, p.String())
	}
	a.puts = nil
	return out
}

func (a *fakeAgent) env(name string) string {
	if name == EnvECSAgentURI {
		return a.srv.URL + "/api/container-1"
	}
	return ""
}

// fakeClock is the protector's now, moved by the test.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// syncBuffer is a log destination the protector and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// op is one event of a scenario: a slot starts or ends a task, time
// passes, or the protector steps (as run does on a wake or a tick), after
// which the agent must have seen exactly want.
type op struct {
	start, end int
	advance    time.Duration
	step       bool
	want       []string
}

func start(n int) op                               { return op{start: n} }
func end(n int) op                                 { return op{end: n} }
func after(d time.Duration) op                     { return op{advance: d} }
func stepWants(want ...string) op                  { return op{step: true, want: want} }
func stepAfter(d time.Duration, want ...string) op { return op{advance: d, step: true, want: want} }

// The protector protects the container while any slot runs a task, with
// few requests: on at the first busy slot, renewed before it expires,
// off once every slot has been idle for the grace; failures are logged
// and retried with backoff, never fatal.
func TestProtector(t *testing.T) {
	t.Parallel()
	on := fmt.Sprintf("on %dm", int(protectFor/time.Minute))
	cases := []struct {
		name       string
		replies    []agentReply
		ops        []op
		logged     []string // substrings the log must hold
		lastLogged string   // and its last line
	}{
		{name: "no request without work", ops: []op{
			stepWants(), stepAfter(time.Hour), stepAfter(protectFor),
		}},
		{name: "on when the first slot becomes busy, off after the idle grace", ops: []op{
			start(1), stepWants(on),
			end(1), stepWants(),
			stepAfter(idleGrace - time.Second),
			stepAfter(time.Second, "off"),
			stepAfter(time.Hour),
		}, logged: []string{"scale-in protection on", "scale-in protection off"}},
		{name: "debounced: tasks that follow each other within the grace make no requests", ops: []op{
			start(1), stepWants(on),
			end(1), after(idleGrace - time.Second), start(1), stepWants(),
			end(1), after(idleGrace / 2), start(1), stepWants(),
			start(1), end(1), end(1), stepWants(),
			stepAfter(idleGrace, "off"),
		}},
		{name: "off only when every slot is idle", ops: []op{
			start(3), stepWants(on),
			end(2), stepAfter(time.Minute),
			end(1), stepAfter(idleGrace - time.Second),
			stepAfter(time.Second, "off"),
		}},
		{name: "renewed before it expires while a slot stays busy", ops: []op{
			start(1), stepWants(on),
			stepAfter(protectFor - renewBefore - time.Second),
			stepAfter(time.Second, on),
			stepAfter(protectFor - renewBefore - time.Second),
			stepAfter(time.Second, on),
			end(1), stepAfter(idleGrace, "off"),
		}},
		{name: "a failed set is logged and retried with backoff", replies: []agentReply{agentError, agentFailure}, ops: []op{
			start(1), stepWants(on), // 500: retry in protectRetry
			stepAfter(protectRetry - time.Second),
			stepAfter(time.Second, on), // ECS's failure: retry in 2*protectRetry
			stepAfter(2*protectRetry - time.Second),
			stepAfter(time.Second, on), // set
			stepAfter(time.Minute),
		}, logged: []string{"set failed", "ServerException", "TASK_NOT_VALID", "retry_in=30s", "retry_in=1m0s", "scale-in protection on"}},
		{name: "a failed lift is retried until it succeeds", replies: []agentReply{{}, agentGarbled}, ops: []op{
			start(1), stepWants(on), end(1),
			stepAfter(idleGrace, "off"), // 502
			stepAfter(protectRetry, "off"),
			stepAfter(time.Hour),
		}, logged: []string{"lift failed", "502 Bad Gateway", "scale-in protection off"}},
		{name: "a lift that keeps failing stops once the protection has expired", replies: []agentReply{{}, agentError, agentError, agentError, agentError, agentError}, ops: []op{
			start(1), stepWants(on), end(1),
			stepAfter(idleGrace, "off"),
			stepAfter(protectRetry, "off"),
			stepAfter(2*protectRetry, "off"),
			stepAfter(4*protectRetry, "off"),
			stepAfter(8*protectRetry, "off"), // now past protectFor
			stepAfter(protectMaxRetry),
			stepAfter(time.Hour),
		}},
		{name: "backoff is capped, and a success resets it", replies: []agentReply{agentError, agentError, agentError, agentError, agentError, agentError, agentError, {}, agentError}, ops: []op{
			start(1), stepWants(on), // retry in 30s
			stepAfter(protectRetry, on),    // 1m
			stepAfter(2*protectRetry, on),  // 2m
			stepAfter(4*protectRetry, on),  // 4m
			stepAfter(8*protectRetry, on),  // 8m
			stepAfter(16*protectRetry, on), // 10m, not 16m
			stepAfter(protectMaxRetry - time.Second),
			stepAfter(time.Second, on),          // 10m again
			stepAfter(protectMaxRetry, on),      // set
			end(1), stepAfter(idleGrace, "off"), // fails: retry in 30s
		}, logged: []string{"retry_in=8m0s", "retry_in=10m0s"}, lastLogged: "retry_in=30s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			agent := newFakeAgent(t, c.replies...)
			clock := &fakeClock{t: time.Date(2026, 11, 23, 17, 0, 0, 0, time.UTC)}
			var logs syncBuffer
			p := newProtector(agent.env, agent.srv.Client(), slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), clock.now)
			for i, o := range c.ops {
				for range o.start {
					p.TaskStarted()
				}
				for range o.end {
					p.TaskEnded()
				}
				clock.advance(o.advance)
				if !o.step {
					continue
				}
				p.step(context.Background())
				if got := agent.take(); !equal(got, o.want) {
					t.Fatalf("op %d: the agent saw %v, want %v\nlog:\n%s", i, got, o.want, logs.String())
				}
			}
			lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
			if last := lines[len(lines)-1]; !strings.Contains(last, c.lastLogged) {
				t.Errorf("the log's last line %q lacks %q", last, c.lastLogged)
			}
			for _, s := range c.logged {
				if !strings.Contains(logs.String(), s) {
					t.Errorf("the log lacks %q:\n%s", s, logs.String())
				}
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Outside ECS (no ECS_AGENT_URI) there is no protector and the poller
// gets no Activity; on ECS the endpoint is the agent's URI's.
func TestProtectorOnlyOnECS(t *testing.T) {
	for _, c := range []struct {
		name, uri, want string
	}{
		{"not on ECS", "", ""},
		{"on ECS", "http://169.254.170.2/api/abc-123", "http://169.254.170.2/api/abc-123/task-protection/v1/state"},
		{"trailing slash", "http://169.254.170.2/api/abc-123/", "http://169.254.170.2/api/abc-123/task-protection/v1/state"},
	} {
		t.Run(c.name, func(t *testing.T) {
			getenv := func(name string) string {
				if name == EnvECSAgentURI {
					return c.uri
				}
				return ""
			}
			p := newProtector(getenv, http.DefaultClient, slog.New(slog.DiscardHandler), time.Now)
			switch {
			case c.want == "" && p != nil:
				t.Errorf("a protector for %q, want none", p.url)
			case c.want != "" && (p == nil || p.url != c.want):
				t.Errorf("protector %+v, want one for %s", p, c.want)
			}
		})
	}
	t.Run("the host's", func(t *testing.T) {
		t.Setenv(EnvECSAgentURI, "")
		a, stop := startProtection(slog.New(slog.DiscardHandler))
		defer stop()
		if a != nil {
			t.Errorf("Activity %v outside ECS, want nil", a)
		}
	})
}

// run protects at once when the first slot becomes busy (no tick needed)
// and lifts the protection on the first tick after the idle grace.
func TestProtectorRun(t *testing.T) {
	t.Parallel()
	agent := newFakeAgent(t)
	agent.seen = make(chan protectPut, 10)
	clock := &fakeClock{t: time.Date(2026, 11, 23, 17, 0, 0, 0, time.UTC)}
	p := newProtector(agent.env, agent.srv.Client(), slog.New(slog.DiscardHandler), clock.now)
	ctx, cancel := context.WithCancel(context.Background())
	tick := make(chan time.Time)
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.run(ctx, tick)
	}()
	wait := func(what string) protectPut {
		t.Helper()
		select {
		case put := <-agent.seen:
			return put
		case <-time.After(10 * time.Second): // a failsafe, not a synchronisation
			t.Fatalf("no request: %s", what)
			return protectPut{}
		}
	}

	p.TaskStarted()
	if put := wait("protection on at the first busy slot"); put != (protectPut{true, int(protectFor / time.Minute)}) {
		t.Errorf("first request %v, want on", put)
	}
	p.TaskStarted()
	p.TaskEnded()
	p.TaskEnded()
	clock.advance(idleGrace)
	tick <- clock.now() // received by run: the step after it follows
	if put := wait("protection off after the idle grace"); put != (protectPut{false, 0}) {
		t.Errorf("second request %v, want off", put)
	}
	cancel()
	<-done
	if n := len(agent.take()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}
}
