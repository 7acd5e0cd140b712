// Package client drives Batchwork from Go through its HTTP API: a
// deployed stack's API Gateway, with requests signed by SigV4 from the AWS
// credential chain, or the local runner, with the owner header and the
// runner's token. The batchwork command is built on it, so what the
// command does a program can do the same way.
//
// # Connecting
//
// To the local runner (batchwork-local, make demo), which takes the
// caller's identity from the owner header and checks the token it wrote
// for this run (LocalToken finds it):
//
//	u, _ := url.Parse("http://127.0.0.1:8080")
//	token, _, err := client.LocalToken(os.Getenv, u)
//	if err != nil { ... }
//	c := &client.Client{Endpoint: u, Signer: client.LocalOwner{Owner: "alice", Token: token}, Retries: 3}
//
// To a deployed stack, whose API Gateway checks SigV4 signatures (the
// default credential chain: environment, shared files, SSO, instance
// roles; the region from the endpoint's host name):
//
//	u, _ := url.Parse("https://abc123.execute-api.eu-west-1.amazonaws.com")
//	signer, err := client.NewSigV4(ctx, u, "", "", nil)
//	if err != nil { ... }
//	c := &client.Client{Endpoint: u, Signer: signer, Retries: 3}
//
// # Calls
//
// One method per route: Submit (or SubmitSpec), Status, Watch, Cancel,
// Result, Redrive, Rerun, DeleteJob, DeleteData, WhoAmI, and the
// schedules' CreateSchedule, GetSchedule, PauseSchedule, ResumeSchedule
// and DeleteSchedule. A list has two methods: List<Name> reads one page
// (its NextCursor continues it) and <Name> iterates over every item of
// every page (Jobs, Tasks, History, Outputs, BadRecords, Logs, Schedules,
// ScheduleRuns), stopping at the first error, which it yields.
//
// Requests are retried on throttling, gateway errors and network errors,
// with backoff, up to Client.Retries times; a submission is safe to retry
// because it carries an Idempotency-Key.
//
// # Errors
//
// An error answer of the API is an *APIError; errors.Is matches it to its
// kind: ErrNotFound, ErrInvalid (with the spec's problems in
// APIError.Errors), ErrConflict, ErrEnded, ErrRunning, ErrDataDeleted,
// ErrThrottled, ErrUnauthorized and ErrUnavailable. A request that could
// not be signed is an *AuthError, and one that got no answer a *NetError.
package client
