// Package cli is the batchwork command: submit, follow, list, cancel and
// fetch the results of Batchwork jobs, against a deployed API (signed with
// SigV4 from the usual AWS credential chain) or the local runner.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"golang.org/x/term"

	"github.com/batchwork/batchwork/client"
	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
)

// Exit codes. They are documented in docs/cli.md and in
// `batchwork help`; scripts rely on them, so they never change meaning.
const (
	ExitOK        = 0 // success
	ExitError     = 1 // anything else: network, server or local I/O error
	ExitUsage     = 2 // bad command line: unknown command or flag, missing argument
	ExitInvalid   = 3 // the API rejected the request (400, 413), or a spec is invalid
	ExitNotFound  = 4 // no such job (or not one of yours)
	ExitConflict  = 5 // conflict: the job already ended (cancel), an Idempotency-Key reused
	ExitFailed    = 6 // the job ended FAILED (watch, submit --wait)
	ExitCancelled = 7 // the job ended CANCELLED (watch, submit --wait)
	ExitAuth      = 8 // not authenticated: no or rejected credentials
	ExitInterrupt = 130
)

// Env is the world the command runs in; tests replace every part.
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Getenv         func(string) string
	// TTY says whether Stdout is a terminal: then output is for people,
	// with a live progress bar (and colour unless NO_COLOR); otherwise it
	// is plain lines, no colour, no bar.
	TTY  bool
	Now  func() time.Time
	Loc  *time.Location
	HTTP *http.Client
	// Sleep waits between polls and retries.
	Sleep func(context.Context, time.Duration) error
}

// OSEnv is the process's environment.
func OSEnv() Env {
	return Env{
		Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv,
		TTY: term.IsTerminal(int(os.Stdout.Fd())), Now: time.Now, Loc: time.Local,
		HTTP: &http.Client{CheckRedirect: noRedirects}, Sleep: client.Sleep,
	}
}

// noRedirects keeps the CLI's requests where the user sent them: a
// redirect would carry the owner header, a session token and the spec to
// wherever the server names, https or not. The API never redirects.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// globals are the flags every command takes.
type globals struct {
	endpoint, owner, auth, region, profile, output string
	noColor                                        bool
	timeout                                        time.Duration
}

func (g *globals) register(fs *flag.FlagSet, env Env) {
	fs.StringVar(&g.endpoint, "endpoint", envOr(env, "BATCHWORK_ENDPOINT", "http://127.0.0.1:8080"), "API base URL (env BATCHWORK_ENDPOINT)")
	fs.StringVar(&g.owner, "owner", envOr(env, "BATCHWORK_OWNER", envOr(env, "USER", "local")), "your identity on the local runner (env BATCHWORK_OWNER)")
	fs.StringVar(&g.auth, "auth", envOr(env, "BATCHWORK_AUTH", "auto"), "auto, local (owner header) or sigv4 (env BATCHWORK_AUTH); auto signs unless the endpoint is loopback")
	fs.StringVar(&g.region, "region", "", "AWS region to sign for (default: from the endpoint or the AWS configuration)")
	fs.StringVar(&g.profile, "profile", env.Getenv("AWS_PROFILE"), "AWS profile for credentials")
	fs.StringVar(&g.output, "output", "text", "output format: text or json")
	fs.StringVar(&g.output, "o", "text", "shorthand for --output")
	fs.BoolVar(&g.noColor, "no-color", false, "no colour even on a terminal (also NO_COLOR)")
	fs.DurationVar(&g.timeout, "timeout", 30*time.Second, "timeout of each API request")
}

func envOr(env Env, name, def string) string {
	if v := env.Getenv(name); v != "" {
		return v
	}
	return def
}

// command is one subcommand.
type command struct {
	name, args, summary string
	// help is the long description; examples are shown under it.
	help     string
	examples []string
	flags    func(fs *flag.FlagSet, o *opts)
	minArgs  int
	maxArgs  int
	run      func(ctx context.Context, a *app, args []string) int
}

// opts holds every command's own flags.
type opts struct {
	wait, all, list, presign                          bool
	badRecords                                        bool   // result --bad-records (badrecords.go)
	at                                                string // submit --at (startat.go)
	key, status, name, stage, state, cursor, download string
	limit                                             int
	interval                                          time.Duration
	// init and dev (scaffold.go, dev.go)
	module, replace, pkg, data string
	execDir                    string // dev --exec-dir (devexec.go)
	keep                       bool
	listen                     string // ui (ui.go)
	// logs (logs.go)
	task, since string
	follow      bool
	params      paramFlag // submit --param (params.go)
}

// app is a running command.
type app struct {
	env Env
	g   globals
	o   opts
	cmd *command
	api *client.Client
}

var commands []*command

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// Main runs the command line args (without the program name) and returns
// the exit code.
func Main(ctx context.Context, args []string, env Env) int {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		if len(args) > 1 {
			if c := lookup(args[1]); c != nil {
				printCommandHelp(env.Stdout, c)
				return ExitOK
			}
			fmt.Fprintf(env.Stderr, "batchwork: unknown command %q\n", args[1])
			return ExitUsage
		}
		printMainHelp(env.Stdout)
		if len(args) == 0 {
			return ExitUsage
		}
		return ExitOK
	}
	args = commandFirst(args, env)
	c := lookup(args[0])
	if c == nil {
		fmt.Fprintf(env.Stderr, "batchwork: unknown command %q; run 'batchwork help'\n", args[0])
		return ExitUsage
	}
	a := &app{env: env, cmd: c}
	fs := flag.NewFlagSet("batchwork "+c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	a.g.register(fs, env)
	if c.flags != nil {
		c.flags(fs, &a.o)
	}
	pos, err := parseInterspersed(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		printCommandHelp(env.Stdout, c)
		return ExitOK
	}
	if err != nil {
		fmt.Fprintf(env.Stderr, "batchwork %s: %v\nusage: batchwork %s %s (see batchwork %s --help)\n", c.name, err, c.name, c.args, c.name)
		return ExitUsage
	}
	if len(pos) < c.minArgs || len(pos) > c.maxArgs {
		fmt.Fprintf(env.Stderr, "batchwork %s: want %s\nusage: batchwork %s %s (see batchwork %s --help)\n", c.name, argsWord(c), c.name, c.args, c.name)
		return ExitUsage
	}
	if a.g.output != "text" && a.g.output != "json" {
		fmt.Fprintf(env.Stderr, "batchwork %s: --output must be text or json, not %q\n", c.name, a.g.output)
		return ExitUsage
	}
	return c.run(ctx, a, pos)
}

func argsWord(c *command) string {
	if c.maxArgs == 0 {
		return "no arguments"
	}
	return strings.TrimSpace(c.args)
}

// commandFirst moves global flags given before the command after it
// ("--output json list" is "list --output json"), where the command's
// flag set, which has the globals too, parses them.
func commandFirst(args []string, env Env) []string {
	if len(args) == 0 || !strings.HasPrefix(args[0], "-") {
		return args
	}
	fs := flag.NewFlagSet("batchwork", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var g globals
	g.register(fs, env)
	if err := fs.Parse(args); err != nil || fs.NArg() == 0 {
		return args // the command's parse reports it
	}
	rest := fs.Args()
	lead := args[:len(args)-len(rest)]
	return append(append([]string{rest[0]}, lead...), rest[1:]...)
}

// parseInterspersed parses flags given before, between or after the
// positional arguments, as people type them ("status ID -o json").
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// client returns the API client, choosing how to authenticate.
func (a *app) client(ctx context.Context) (*client.Client, error) {
	if a.api != nil {
		return a.api, nil
	}
	u, err := url.Parse(a.g.endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, &usageError{fmt.Sprintf("--endpoint %q is not an http(s) URL", a.g.endpoint)}
	}
	mode := a.g.auth
	if mode == "auto" {
		mode = "sigv4"
		if client.IsLoopback(u) {
			mode = "local"
		}
	}
	var s client.Signer
	var hint string
	switch mode {
	case "local":
		tok, h, err := client.LocalToken(a.env.Getenv, u)
		if err != nil {
			return nil, err
		}
		s, hint = client.LocalOwner{Owner: a.g.owner, Token: tok}, h
	case "sigv4":
		if u.Scheme == "http" && !client.IsLoopback(u) {
			// A signed request in clear text shows its headers, body and
			// signature to anyone on the path, and invites a replay.
			return nil, &usageError{fmt.Sprintf("--endpoint %q: signed requests go to https:// endpoints only (or http:// on this machine)", a.g.endpoint)}
		}
		s, err = client.NewSigV4(ctx, u, a.g.region, a.g.profile, a.env.Now)
		if errors.Is(err, client.ErrNoRegion) {
			return nil, &usageError{err.Error() + ": set --region or AWS_REGION"}
		}
		if err != nil {
			return nil, err
		}
	default:
		return nil, &usageError{fmt.Sprintf("--auth must be auto, local or sigv4, not %q", a.g.auth)}
	}
	hc := *a.env.HTTP
	hc.Timeout = a.g.timeout
	a.api = newClient(u, &hc, s, hint, a.env.Sleep)
	return a.api, nil
}

// newClient is the client every command calls the API with.
func newClient(endpoint *url.URL, hc *http.Client, s client.Signer, authHint string, sleep func(context.Context, time.Duration) error) *client.Client {
	return &client.Client{Endpoint: endpoint, HTTP: hc, Signer: s, AuthHint: authHint, NetHint: "is the runner up? see --endpoint",
		Retries: 3, Sleep: sleep, UserAgent: "batchwork-cli"}
}

type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// fail prints err and returns its exit code.
func (a *app) fail(err error) int {
	var ae *client.APIError
	var ue *usageError
	var au *client.AuthError
	switch {
	case errors.Is(err, context.Canceled):
		return ExitInterrupt
	case errors.As(err, &ue):
		fmt.Fprintf(a.env.Stderr, "batchwork %s: %s\n", a.cmd.name, termsafe.Text(ue.msg))
		return ExitUsage
	case errors.As(err, &au):
		fmt.Fprintf(a.env.Stderr, "batchwork %s: %s\n", a.cmd.name, termsafe.Text(au.Error()))
		return ExitAuth
	case errors.As(err, &ae):
		for _, fe := range ae.Errors {
			fmt.Fprintf(a.env.Stderr, "  %s\n", termsafe.Text(fe.Error()))
		}
		fmt.Fprintf(a.env.Stderr, "batchwork %s: %s (%s)\n", a.cmd.name, termsafe.Text(ae.Error()), termsafe.Text(ae.Code))
		return exitForAPI(ae)
	}
	// Multi-line on purpose (dev's emulator instructions), and may carry
	// an executor's or the server's text.
	fmt.Fprintf(a.env.Stderr, "batchwork %s: %s\n", a.cmd.name, termsafe.Block(err.Error(), "  "))
	return ExitError
}

// exitForAPI is the exit code of an error answer, by its kind.
func exitForAPI(ae *client.APIError) int {
	switch {
	case errors.Is(ae, client.ErrInvalid):
		return ExitInvalid
	case errors.Is(ae, client.ErrNotFound):
		return ExitNotFound
	case errors.Is(ae, client.ErrConflict):
		return ExitConflict
	case errors.Is(ae, client.ErrUnauthorized):
		return ExitAuth
	}
	return ExitError
}

func (a *app) json() bool { return a.g.output == "json" }

// colour reports whether to colour: a terminal, and neither --no-color
// nor NO_COLOR.
func (a *app) colour() bool {
	return a.env.TTY && !a.g.noColor && a.env.Getenv("NO_COLOR") == "" && a.env.Getenv("TERM") != "dumb"
}

func printMainHelp(w io.Writer) {
	fmt.Fprint(w, `batchwork: submit, follow and manage Batchwork jobs.

Usage:
  batchwork <command> [flags] [arguments]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-11s %s\n", c.name, c.summary)
	}
	fmt.Fprint(w, `
Talking to an API:
  The local runner (batchwork-local, make demo) listens on http://127.0.0.1:8080
  and takes your identity from --owner, with the runner's per-run token, read
  from the file it wrote (~/.config/batchwork/local-<port>.token; or set
  BATCHWORK_LOCAL_TOKEN_FILE, or BATCHWORK_LOCAL_TOKEN to the token itself).
  A deployed API is signed with SigV4 from the usual AWS credential chain:
    export BATCHWORK_ENDPOINT=https://abc123.execute-api.eu-west-1.amazonaws.com

Output:
  Human-friendly on a terminal (a live progress bar for watch); plain lines,
  no colour and no bar when stdout is not a terminal; --output json for scripts.

Exit codes:
  0  success
  1  error (network, server, local I/O)
  2  bad command line
  3  invalid request or spec (API 400/413; validate found errors)
  4  no such job (or not yours)
  5  conflict (the job already ended; an Idempotency-Key reused with another spec)
  6  the job ended FAILED (watch, submit --wait)
  7  the job ended CANCELLED (watch, submit --wait)
  8  not authenticated (no or rejected credentials)

Run 'batchwork <command> --help' for a command's flags and examples.
`)
}

func printCommandHelp(w io.Writer, c *command) {
	fmt.Fprintf(w, "Usage: batchwork %s %s\n\n%s\n", c.name, c.args, strings.TrimSpace(c.help))
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	if c.flags != nil {
		var o opts
		c.flags(fs, &o)
		fmt.Fprintln(w, "\nFlags:")
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	fmt.Fprintln(w, "\nGlobal flags:")
	gfs := flag.NewFlagSet("global", flag.ContinueOnError)
	var g globals
	g.register(gfs, Env{Getenv: func(string) string { return "" }})
	gfs.SetOutput(w)
	gfs.PrintDefaults()
	fmt.Fprintln(w, "\nExamples:")
	for _, ex := range c.examples {
		fmt.Fprintf(w, "  %s\n", ex)
	}
	fmt.Fprintln(w, "\nExit codes: see 'batchwork help'.")
}
