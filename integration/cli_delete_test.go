package integration

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/localauth"
	sm "github.com/batchwork/batchwork/statemachine"
)

// losingTransport sends every request, and for the first lose of method
// drops the answer after the server acted on it, as a dropped connection
// or a gateway's timeout does.
type losingTransport struct {
	method string
	lose   atomic.Int32
}

func (l *losingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err == nil && r.Method == l.method && l.lose.Add(-1) >= 0 {
		resp.Body.Close()
		return nil, errors.New("connection reset by peer (injected: the answer was lost)")
	}
	return resp, err
}

// `batchwork delete ID` against the local runner deletes an ended job of
// the caller's and says so; a second run, and another owner's run, say
// there is no such job (exit 4); a running job is a conflict (exit 5).
// A deletion whose answer is lost (the job deleted, the answer never
// arriving) still ends in success: the CLI's retry finds the job gone,
// which is what was asked, and must not report "no such job".
func TestCLIDeleteJob(t *testing.T) {
	t.Parallel()
	reg := batchwork.NewRegistry()
	reg.Register("work", func(ctx context.Context, tk *batchwork.Task) error { return nil })
	reg.Register("hang", func(ctx context.Context, tk *batchwork.Task) error {
		<-ctx.Done()
		return ctx.Err()
	})
	e := newEnv(t, reg, envOptions{})
	ctx := context.Background()
	done := e.submit("done", []byte(`{"name":"done","stages":[{"name":"s","task":"work","partitions":{"count":2}}]}`))
	lost := e.submit("lost", []byte(`{"name":"lost","stages":[{"name":"s","task":"work","partitions":{"count":2}}]}`))
	running := e.submit("running", []byte(`{"name":"running","stages":[{"name":"s","task":"hang","partitions":{"count":1}}]}`))
	for _, id := range []string{done, lost} {
		if st := e.waitJob(id, time.Minute); st.State != string(sm.JobSucceeded) {
			t.Fatalf("job %s %s", id, st.State)
		}
	}
	run := func(owner string, tr http.RoundTripper, args ...string) (int, string) {
		var out, errOut syncBuffer
		vars := map[string]string{"BATCHWORK_ENDPOINT": e.r.URL, "BATCHWORK_OWNER": owner, localauth.TokenEnv: e.r.Token}
		code := cli.Main(ctx, args, cli.Env{
			Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errOut,
			Getenv: func(k string) string { return vars[k] },
			Now:    time.Now, Loc: time.UTC, HTTP: &http.Client{Transport: tr},
			Sleep: func(context.Context, time.Duration) error { return nil },
		})
		return code, out.String() + errOut.String()
	}
	for _, c := range []struct {
		name  string
		owner string
		id    string
		code  int
		says  string
	}{
		{"another owner's job", "mallory", done, cli.ExitNotFound, "no such job"},
		{"a running job", "tester", running, cli.ExitConflict, "RUNNING"},
		{"the owner's ended job", "tester", done, cli.ExitOK, "Deleted job " + done + " (SUCCEEDED)"},
		{"again", "tester", done, cli.ExitNotFound, "no such job"},
	} {
		code, out := run(c.owner, http.DefaultTransport, "delete", c.id)
		if code != c.code || !strings.Contains(strings.ToLower(out), strings.ToLower(c.says)) {
			t.Errorf("%s: exit %d, %q; want exit %d saying %q", c.name, code, out, c.code, c.says)
		}
	}
	if st, err := e.r.Service.Status(ctx, "tester", done); err == nil {
		t.Errorf("the deleted job still has a status: %+v", st)
	}

	lose := &losingTransport{method: http.MethodDelete}
	lose.lose.Store(1)
	code, out := run("tester", lose, "delete", lost)
	if lose.lose.Load() >= 0 {
		t.Fatalf("no answer was lost (%d left)", lose.lose.Load())
	}
	if _, err := e.r.Service.Status(ctx, "tester", lost); err == nil {
		t.Fatalf("the job survived its deletion")
	}
	if code != cli.ExitOK || !strings.Contains(out, "Deleted job "+lost) {
		t.Errorf("delete whose answer was lost: exit %d, %q; want success", code, out)
	}
	// Its executor stops at once instead of at the env's shutdown.
	if _, err := e.r.Service.Cancel(ctx, "tester", running); err != nil {
		t.Fatal(err)
	}
}
