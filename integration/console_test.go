package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
	"github.com/batchwork/batchwork/examples/wordcount"
	"github.com/batchwork/batchwork/shared/batchwork"
	"github.com/batchwork/batchwork/shared/control"
)

// The web console (batchwork ui) in a real headless browser: Debian's
// chromium, driven through chromedriver's WebDriver protocol. The test
// runs word count with its tasks held at gates, so the page is seen
// before, while and after the job makes progress: the DAG's stages and
// shuffle edge, a stage's progress text changing while the job runs and
// then reaching done, one timeline bar per attempt (a retry included),
// the failed attempt's error, the job list and its filter, and schedules.
// It also checks what the console refuses: other hosts and origins, calls
// without the token or the console's header, and every change but cancel.
// If chromium or chromedriver is missing or cannot start, it fails (make
// chromium installs them).
func TestConsoleInBrowser(t *testing.T) {
	t.Parallel()
	start := time.Now()
	// wait is waitFor, logging when each step is reached.
	wait := func(within time.Duration, what string, cond func() bool) {
		t.Helper()
		waitFor(t, within, what, cond)
		t.Logf("%5.1fs %s", time.Since(start).Seconds(), what)
	}
	wd := startBrowser(t)
	t.Logf("%5.1fs chromium started", time.Since(start).Seconds())

	reg := batchwork.NewRegistry()
	mapGate, reduceGate := make(chan struct{}), make(chan struct{})
	gate := func(ctx context.Context, g chan struct{}) error {
		select {
		case <-g:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	const injected = "injected: the first attempt of map/1 fails"
	reg.Register(wordcount.MapTask, func(ctx context.Context, tk *batchwork.Task) error {
		if err := gate(ctx, mapGate); err != nil {
			return err
		}
		if tk.Partition == 1 && tk.Attempt == 1 {
			return errors.New(injected)
		}
		// Staggered, so progress moves in steps a poll can see.
		time.Sleep(time.Duration(tk.Partition%4) * 400 * time.Millisecond)
		return wordcount.Map(ctx, tk)
	})
	reg.Register(wordcount.ReduceTask, func(ctx context.Context, tk *batchwork.Task) error {
		if err := gate(ctx, reduceGate); err != nil {
			return err
		}
		return wordcount.Reduce(ctx, tk)
	})
	e := newEnv(t, reg, envOptions{slots: 8, logFile: filepath.Join(t.TempDir(), "runner.log")})
	corpus := wordcount.Corpus(42, 48<<10)
	for i := 0; i < 2; i++ {
		e.putInput("tester", fmt.Sprintf("corpus/part-%d.txt", i), corpus[len(corpus)*i/2:len(corpus)*(i+1)/2])
	}

	// batchwork ui, as a user runs it, against the test's runner.
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut syncBuffer
	code := make(chan int, 1)
	go func() { code <- e.cliRun(ctx, "tester", &out, &errOut, "ui", "--listen", "127.0.0.1:0") }()
	t.Cleanup(func() {
		cancel()
		select {
		case c := <-code:
			if c != cli.ExitOK {
				t.Errorf("batchwork ui: exit %d: %s", c, errOut.String())
			}
		case <-time.After(10 * time.Second):
			t.Error("batchwork ui did not stop")
		}
	})
	var consoleURL string
	urlRE := regexp.MustCompile(`http://127\.0\.0\.1:\d+/[0-9a-f]{32}/`)
	waitFor(t, 10*time.Second, "batchwork ui to print its URL", func() bool {
		consoleURL = urlRE.FindString(out.String())
		return consoleURL != "" || strings.Contains(errOut.String(), "batchwork ui")
	})
	if consoleURL == "" {
		t.Fatalf("batchwork ui: %s%s", out.String(), errOut.String())
	}

	t.Logf("%5.1fs runner and console up", time.Since(start).Seconds())
	id := e.submitAs("tester", "console", wordcount.Spec("wordcount", "inputs:corpus/", 8<<10, 3))
	wd.navigate(consoleURL + "#/job/" + id)

	// The DAG: both stages as SVG nodes, and the shuffle edge between them.
	wait(30*time.Second, "the DAG's stages", func() bool {
		return wd.script(`return [...document.querySelectorAll('#dag svg g.stage')].map(g => g.dataset.stage).join(',')`) == "map,reduce"
	})
	if edge := wd.script(`const p = document.querySelector('#dag path.edge[data-from="map"][data-to="reduce"]');
		const l = document.querySelector('#dag text.edge-label'); return (p ? 'edge ' : '') + (l ? l.textContent : '')`); edge != "edge shuffle ×3" {
		t.Fatalf("the DAG's edge: %q, want the map -> reduce edge labelled shuffle ×3", edge)
	}
	progress := func(stage string) string {
		return wd.script(`const g = document.querySelector('#dag g.stage[data-stage="` + stage + `"]');
			return g ? g.querySelector('text.state').textContent + ' ' + g.querySelector('text.progress').textContent : ''`)
	}
	jobState := func() string {
		return wd.script(`const s = document.getElementById('job-state'); return s ? s.textContent : ''`)
	}

	// Live progress: the map stage's text before any task commits, then a
	// change seen while the job still runs (reduce is held).
	var first string
	planned := regexp.MustCompile(`^RUNNING 0/(\d+) tasks$`)
	wait(20*time.Second, "the map stage planned, nothing committed", func() bool {
		first = progress("map")
		return planned.MatchString(first)
	})
	mapTasks := planned.FindStringSubmatch(first)[1]
	if mapTasks == "0" || mapTasks == "1" {
		t.Fatalf("map has %s tasks; want several to see progress", mapTasks)
	}
	close(mapGate)
	var second string
	wait(20*time.Second, "the map stage's progress to change while the job runs", func() bool {
		second = progress("map")
		return second != first && jobState() == "RUNNING"
	})
	t.Logf("map progress: %q, then %q", first, second)
	wait(30*time.Second, "the map stage to complete", func() bool {
		return progress("map") == "COMPLETED "+mapTasks+"/"+mapTasks+" tasks · 1 failed"
	})
	// The picture in the README: map done with its retry, reduce running.
	wait(10*time.Second, "reduce's attempts running on the timeline, the retry under failed attempts", func() bool {
		return wd.script(`return String(document.querySelectorAll('#timeline rect.attempt.o-running').length)`) == "3" &&
			strings.Contains(wd.script(`return document.getElementById('failures').textContent`), injected)
	})
	if s := jobState(); s != "RUNNING" {
		t.Fatalf("job state %q while reduce is held, want RUNNING", s)
	}
	// Each running task has its row, with a button that cancels it alone.
	wait(10*time.Second, "reduce's running tasks listed, each with its cancel button", func() bool {
		return wd.script(`return [...document.querySelectorAll('#running-tasks button[data-cancel-task]')].map(b => b.dataset.cancelTask).sort().join(',')`) ==
			"reduce/0,reduce/1,reduce/2"
	})
	shot := os.Getenv("BATCHWORK_CONSOLE_SCREENSHOT")
	if shot == "" {
		shot = filepath.Join(t.TempDir(), "console.png")
	}
	wd.screenshot(shot)
	t.Logf("screenshot of the running job's page: %s", shot)
	close(reduceGate)
	wait(30*time.Second, "the job to succeed on the page", func() bool {
		return jobState() == "SUCCEEDED" && progress("reduce") == "COMPLETED 3/3 tasks"
	})

	// The timeline: one bar per attempt, the retry and the failure included.
	var tl control.TaskList
	e.callJSON("tester", http.MethodGet, "/jobs/"+id+"/tasks?limit=200", nil, http.StatusOK, &tl)
	attempts := 0
	for _, tk := range tl.Tasks {
		attempts += len(tk.Attempts)
	}
	if attempts != len(tl.Tasks)+1 {
		t.Fatalf("%d attempts of %d tasks; want one retry", attempts, len(tl.Tasks))
	}
	wait(10*time.Second, "one timeline bar per attempt", func() bool {
		return wd.script(`return String(document.querySelectorAll('#timeline svg rect.attempt').length)`) == fmt.Sprint(attempts)
	})
	if bars := wd.script(`return [...document.querySelectorAll('#timeline rect.attempt[data-task="map/1"]')].map(r => r.dataset.outcome).join(',')`); bars != "retried,committed" {
		t.Fatalf("map/1's bars: %q, want retried,committed", bars)
	}
	wait(10*time.Second, "a committed bar per task", func() bool {
		return wd.script(`return String(document.querySelectorAll('#timeline rect.attempt.o-committed').length)`) == fmt.Sprint(len(tl.Tasks))
	})
	if f := wd.script(`return document.getElementById('failures').textContent`); !strings.Contains(f, "map/1") || !strings.Contains(f, injected) {
		t.Fatalf("failed attempts section: %q, want map/1 with its error", f)
	}
	// The failed attempt's log lines (GET /jobs/{id}/logs), under it.
	wd.script(`document.querySelector('#failures button.logs[data-logs="map/1/1"]').click(); return ''`)
	wait(10*time.Second, "the failed attempt's log lines", func() bool {
		return strings.Contains(wd.script(`const p = document.querySelector('#failures tr[data-logs-of="map/1/1"] pre'); return p ? p.textContent : ''`), "task failed, will retry")
	})

	// The job list, its state filter, and schedules with their runs.
	wd.navigate(consoleURL + "#/jobs")
	wait(10*time.Second, "the job in the job list", func() bool {
		return wd.script(`const r = document.querySelector('#jobs-body tr[data-job="`+id+`"]'); return r ? r.textContent : ''`) != ""
	})
	wd.navigate(consoleURL + "#/jobs?status=FAILED")
	wait(10*time.Second, "the FAILED filter to leave no job", func() bool {
		return wd.script(`return document.getElementById('jobs-body').textContent`) == "No jobs."
	})
	var sc control.ScheduleView
	e.callJSON("tester", http.MethodPost, "/schedules", []byte(`{"name":"nightly","expression":"30 2 * * *","spec":
		{"name":"n","stages":[{"name":"a","task":"wordcount.reduce","partitions":{"count":1}}]}}`), http.StatusCreated, &sc)
	wd.navigate(consoleURL + "#/schedules")
	wait(10*time.Second, "the schedule in the list", func() bool {
		return strings.Contains(wd.script(`const r = document.querySelector('#schedules-body tr[data-schedule="`+sc.ID+`"]'); return r ? r.textContent : ''`), "30 2 * * *")
	})
	wd.navigate(consoleURL + "#/schedules/" + sc.ID)
	wait(10*time.Second, "the schedule's runs", func() bool {
		return wd.script(`const b = document.getElementById('runs-body'); return b ? b.textContent : ''`) == "No runs yet."
	})
	if msg := wd.script(`return document.getElementById('error').hidden ? '' : document.getElementById('error').textContent`); msg != "" {
		t.Fatalf("the page shows an error: %s", msg)
	}

	checkConsoleGuards(t, consoleURL, id)
}

// checkConsoleGuards calls the console as other local sites could.
func checkConsoleGuards(t *testing.T, consoleURL, job string) {
	t.Helper()
	host := strings.TrimPrefix(consoleURL, "http://")
	host = host[:strings.Index(host, "/")]
	type call struct {
		what, method, url string
		header            []string
		want              int
	}
	api := consoleURL + "api"
	con := "X-Batchwork-Console"
	for _, c := range []call{
		{"the page", "GET", consoleURL, nil, 200},
		{"the API through the console", "GET", api + "/jobs", []string{con, "1"}, 200},
		{"cancel of an ended job, passed to the API", "POST", api + "/jobs/" + job + "/cancel", []string{con, "1", "Origin", "http://" + host}, 409},
		{"no token", "GET", "http://" + host + "/", nil, 404},
		{"a wrong token", "GET", "http://" + host + "/" + strings.Repeat("0", 32) + "/api/jobs", []string{con, "1"}, 404},
		{"another Host (DNS rebinding)", "GET", api + "/jobs", []string{con, "1", "Host", "evil.example:" + host[strings.LastIndex(host, ":")+1:]}, 403},
		{"another Origin", "GET", api + "/jobs", []string{con, "1", "Origin", "http://evil.example"}, 403},
		{"a cross-site fetch", "GET", api + "/jobs", []string{con, "1", "Sec-Fetch-Site", "cross-site"}, 403},
		{"an API call without the console's header", "GET", api + "/jobs", nil, 403},
		{"a route the console does not proxy", "GET", api + "/jobs/" + job + "/manifest", []string{con, "1"}, 404},
		{"a submission", "POST", api + "/jobs", []string{con, "1", "Origin", "http://" + host}, 403},
		{"a cancel without Origin", "POST", api + "/jobs/" + job + "/cancel", []string{con, "1"}, 403},
		{"a deletion", "DELETE", api + "/jobs/" + job + "/data", []string{con, "1", "Origin", "http://" + host}, 405},
	} {
		req, err := http.NewRequest(c.method, c.url, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(c.header); i += 2 {
			if c.header[i] == "Host" {
				req.Host = c.header[i+1]
			} else {
				req.Header.Set(c.header[i], c.header[i+1])
			}
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("%s: %s %s: status %d, want %d: %s", c.what, c.method, c.url, resp.StatusCode, c.want, body)
		}
		if strings.Contains(string(body), "Bearer") || strings.Contains(strings.ToLower(fmt.Sprint(resp.Header)), "authorization") {
			t.Errorf("%s: the answer carries credentials: %v %s", c.what, resp.Header, body)
		}
	}
}

// webDriver is a minimal W3C WebDriver client for chromedriver.
type webDriver struct {
	t       *testing.T
	base    string
	session string
}

// startBrowser starts chromedriver and a headless chromium session; the
// test ends both. The binaries are Debian's (make chromium), or those
// BATCHWORK_CHROMIUM and BATCHWORK_CHROMEDRIVER name.
func startBrowser(t *testing.T) *webDriver {
	t.Helper()
	browser, driver := os.Getenv("BATCHWORK_CHROMIUM"), os.Getenv("BATCHWORK_CHROMEDRIVER")
	if browser == "" {
		browser = "/usr/bin/chromium"
	}
	if driver == "" {
		driver = "/usr/bin/chromedriver"
	}
	for _, p := range []string{browser, driver} {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("the browser test needs %s: %v (run 'make chromium')", p, err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	var logs syncBuffer
	cmd := exec.Command(driver, fmt.Sprintf("--port=%d", port))
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", driver, err)
	}
	wd := &webDriver{t: t, base: fmt.Sprintf("http://127.0.0.1:%d", port)}
	// The profile directory is made before the cleanup that ends the
	// browser is registered, so that cleanup (cleanups run last first)
	// ends chromium before the directory is removed: removed while chromium
	// still wrote to it, RemoveAll failed with "directory not empty".
	profile := t.TempDir()
	t.Cleanup(func() {
		if wd.session != "" {
			_ = wd.do(http.MethodDelete, "", nil, nil)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("chromedriver:\n%s", logs.String())
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		var st struct {
			Ready bool `json:"ready"`
		}
		if err := wd.do(http.MethodGet, "/status", nil, &st); err == nil && st.Ready {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("chromedriver did not come up on port %d:\n%s", port, logs.String())
		}
		time.Sleep(100 * time.Millisecond) // waiting for a process to listen
	}
	// Flags for a closed network: no background connections, updates or
	// sync; --no-sandbox since tests run as root here.
	args := []string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic", "--no-first-run",
		"--no-default-browser-check", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--disable-default-apps", "--password-store=basic", "--window-size=1400,1500",
		"--user-data-dir=" + profile}
	caps := map[string]any{"capabilities": map[string]any{"alwaysMatch": map[string]any{
		"browserName": "chrome", "goog:chromeOptions": map[string]any{"binary": browser, "args": args},
	}}}
	var sess struct {
		SessionID string `json:"sessionId"`
	}
	if err := wd.do(http.MethodPost, "/session", caps, &sess); err != nil || sess.SessionID == "" {
		t.Fatalf("chromium did not start: %v\n%s", err, logs.String())
	}
	wd.session = sess.SessionID
	return wd
}

// do sends one WebDriver command (path under the session unless it
// starts with /status or /session) and decodes its value.
func (d *webDriver) do(method, path string, in, out any) error {
	u := d.base + path
	if path != "/status" && path != "/session" {
		u = d.base + "/session/" + d.session + path
	}
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	var env struct {
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(raw, &env); err != nil {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, raw)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, env.Value)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(env.Value, out)
}

func (d *webDriver) navigate(u string) {
	d.t.Helper()
	if err := d.do(http.MethodPost, "/url", map[string]string{"url": u}, nil); err != nil {
		d.t.Fatalf("navigate to %s: %v", u, err)
	}
}

// script runs JavaScript in the page and returns its string result.
func (d *webDriver) script(js string) string {
	d.t.Helper()
	var v any
	if err := d.do(http.MethodPost, "/execute/sync", map[string]any{"script": js, "args": []any{}}, &v); err != nil {
		d.t.Fatalf("script %q: %v", js, err)
	}
	if v == nil {
		return ""
	}
	return fmt.Sprint(v)
}

func (d *webDriver) screenshot(path string) {
	d.t.Helper()
	var b64 string
	if err := d.do(http.MethodGet, "/screenshot", nil, &b64); err != nil {
		d.t.Fatalf("screenshot: %v", err)
	}
	png, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		d.t.Fatal(err)
	}
	if err := os.WriteFile(path, png, 0o644); err != nil {
		d.t.Fatal(err)
	}
}
