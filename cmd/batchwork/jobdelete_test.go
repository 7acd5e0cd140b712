package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/cmd/batchwork/cli"
)

func jobDeletion(objects, records int, complete bool) string {
	return fmt.Sprintf(`{"job":%q,"state":"SUCCEEDED","objects":%d,"records":%d,"complete":%v}`, jobID, objects, records, complete)
}

// delete calls DELETE /jobs/ID until nothing is left (the API answers 202
// while some is), sums what the calls deleted, and exits with the API's
// refusals' codes.
func TestDeleteCommand(t *testing.T) {
	del := "DELETE /jobs/" + jobID
	notFound := scriptedAnswer{404, `{"code":"not_found","message":"no such job","field":"id"}`}
	cases := []struct {
		name       string
		args       []string
		answers    []scriptedAnswer
		wantCode   int
		wantCalls  int
		wantStdout string
		wantStderr string
	}{
		{name: "deleted over two calls", args: []string{"delete", jobID},
			answers:  []scriptedAnswer{{202, jobDeletion(10000, 0, false)}, {200, jobDeletion(5, 120, true)}},
			wantCode: cli.ExitOK, wantCalls: 2,
			wantStdout: "Deleted job " + jobID + " (SUCCEEDED): 120 records and 10,005 objects.\n"},
		{name: "json", args: []string{"delete", jobID, "-o", "json"},
			answers:  []scriptedAnswer{{202, jobDeletion(3, 0, false)}, {200, jobDeletion(4, 9, true)}},
			wantCode: cli.ExitOK, wantCalls: 2, wantStdout: jobDeletion(7, 9, true)},
		{name: "finished by another caller", args: []string{"delete", jobID},
			answers:  []scriptedAnswer{{202, jobDeletion(3, 0, false)}, notFound},
			wantCode: cli.ExitOK, wantCalls: 2,
			wantStdout: "Deleted job " + jobID + " (SUCCEEDED): 0 records and 3 objects.\n"},
		{name: "no progress", args: []string{"delete", jobID},
			answers:  []scriptedAnswer{{202, jobDeletion(0, 0, false)}},
			wantCode: cli.ExitError, wantCalls: 1, wantStderr: "the API deleted nothing more but says some is left"},
		{name: "running", args: []string{"delete", jobID},
			answers:  []scriptedAnswer{{409, `{"code":"job_running","message":"job ` + jobID + ` is RUNNING; only an ended job can be deleted (cancel it, or wait for it to end)","field":"id"}`}},
			wantCode: cli.ExitConflict, wantCalls: 1, wantStderr: "only an ended job can be deleted"},
		{name: "not found (or deleted, or another owner's)", args: []string{"delete", jobID},
			answers:  []scriptedAnswer{notFound},
			wantCode: cli.ExitNotFound, wantCalls: 1, wantStderr: "no such job"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api := &scriptedAPI{answers: tc.answers}
			env, stdout, stderr := testEnv(api.serve(t).URL)
			code := cli.Main(context.Background(), tc.args, env)
			if code != tc.wantCode {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tc.wantCode, stderr)
			}
			want := make([]string, tc.wantCalls)
			for i := range want {
				want[i] = del
			}
			if fmt.Sprint(api.got) != fmt.Sprint(want) {
				t.Errorf("calls %v, want %v", api.got, want)
			}
			if strings.HasPrefix(tc.wantStdout, "{") {
				var got, w any
				if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
					t.Fatalf("stdout %q: %v", stdout, err)
				}
				_ = json.Unmarshal([]byte(tc.wantStdout), &w)
				if fmt.Sprint(got) != fmt.Sprint(w) {
					t.Errorf("stdout %s, want %s", stdout, tc.wantStdout)
				}
			} else if stdout.String() != tc.wantStdout {
				t.Errorf("stdout %q, want %q", stdout, tc.wantStdout)
			}
			if !strings.Contains(stderr.String(), tc.wantStderr) {
				t.Errorf("stderr %q, want it to contain %q", stderr, tc.wantStderr)
			}
		})
	}
}
