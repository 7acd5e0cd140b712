package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/internal/console"
)

// uiCommand is `batchwork ui`: the web console (internal/console) against
// the API the CLI talks to, with the CLI's own credentials.
var uiCommand = &command{
	name: "ui", args: "", summary: "serve a local web console: jobs, live DAG and progress, task timeline, failures, schedules",
	help: `Serves the web console on this machine (a loopback address only) and
prints its URL, until Ctrl-C. The console shows your jobs with filters; a
job's stages as a DAG with live progress, rate and ETA; a timeline of its
tasks' attempts, marking retries, failures, speculative copies (and which
one won) and continuations; failed tasks with their errors, what ended
them (error class) and their log lines; its bad records; whether it
succeeded with tolerated failed partitions; its history; and your
schedules with their runs. It can cancel a running job, and change
nothing else.

The page talks only to this command, which calls the API exactly as the
other commands do (--endpoint, --auth, --owner, --profile: the local
runner's token, or SigV4 signing for a deployed stack), so it sees what you
may see and never holds your credentials. The URL carries a random token of
this run: only who has the URL can use the console.

Each task row shows the task's trace id when tracing is on; set
BATCHWORK_TRACE_URL to your trace viewer's URL with {traceId} in it to
make the id a link.`,
	examples: []string{
		"batchwork ui",
		"batchwork ui --listen 127.0.0.1:0",
		"BATCHWORK_TRACE_URL='https://grafana.example.com/explore?traceId={traceId}' batchwork ui",
		"BATCHWORK_ENDPOINT=https://abc123.execute-api.eu-west-1.amazonaws.com batchwork ui --profile prod",
	},
	flags: func(fs *flag.FlagSet, o *opts) {
		fs.StringVar(&o.listen, "listen", "127.0.0.1:8090", "loopback address and port to serve on (port 0: a free one)")
	},
	run: runUI,
}

func runUI(ctx context.Context, a *app, _ []string) int {
	c, err := a.client(ctx)
	if err != nil {
		return a.fail(err)
	}
	srv, err := console.Start(ctx, a.o.listen, console.Options{API: a.g.endpoint, Upstream: upstream(c), TraceURL: a.env.Getenv("BATCHWORK_TRACE_URL")})
	if errors.Is(err, console.ErrNotLoopback) {
		return a.fail(&usageError{"--listen " + err.Error()})
	}
	if errors.Is(err, console.ErrBadTraceURL) {
		return a.fail(&usageError{"BATCHWORK_TRACE_URL: " + err.Error()})
	}
	if err != nil {
		return a.fail(err)
	}
	fmt.Fprintf(a.env.Stdout, "Batchwork console for %s: %s\n(Ctrl-C to stop; the URL's token is this run's: keep it to yourself)\n", a.g.endpoint, srv.URL())
	srv.Wait()
	if ctx.Err() != nil {
		return ExitOK
	}
	return ExitError
}

// upstream is the console's way to the API: one call with c's
// credentials and retries, its answer's status and JSON body. API errors
// are answers (status and {"code","message","field"}).
func upstream(c *client.Client) console.Upstream {
	return func(ctx context.Context, method, path string, query url.Values) (int, []byte, error) {
		var raw json.RawMessage
		err := c.Call(ctx, method, path, query, nil, nil, &raw)
		var ae *client.APIError
		if errors.As(err, &ae) {
			body, _ := json.Marshal(map[string]string{"code": ae.Code, "message": ae.Error(), "field": ae.Field})
			return ae.Status, body, nil
		}
		if err != nil {
			return 0, nil, err
		}
		return http.StatusOK, raw, nil
	}
}
