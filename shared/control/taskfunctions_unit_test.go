package control

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/batchwork/batchwork/shared/spec"
)

// A lambda stage may invoke only a function the operator allows; anything
// else is refused at submit with an error on the stage's lambda field,
// and nothing is written.
func TestLambdaStagesInvokeOnlyAllowedFunctions(t *testing.T) {
	t.Parallel()
	const arn = "arn:aws:lambda:eu-west-1:123456789012:function:scorer"
	allowed := []string{"resize", arn}
	oneStage := func(fn string) string {
		return fmt.Sprintf(`{"name":"l","lease":"10s","stages":[{"name":"s","lambda":%q,"partitions":{"count":1}}]}`, fn)
	}
	cases := []struct {
		name, spec string
		allowed    []string
		field, msg string // "": accepted
	}{
		{name: "an allowed name", spec: oneStage("resize"), allowed: allowed},
		{name: "an allowed name's alias", spec: oneStage("resize:live"), allowed: allowed},
		{name: "an allowed ARN", spec: oneStage(arn), allowed: allowed},
		{name: "an allowed ARN's version", spec: oneStage(arn + ":7"), allowed: allowed},
		{name: "tasks and programs are not functions", allowed: nil,
			spec: `{"name":"l","lease":"10s","stages":[{"name":"s","exec":["x"],"partitions":{"count":1}}]}`},

		{name: "a function not allowed", spec: oneStage("delete-everything"), allowed: allowed,
			field: "stages[0].lambda", msg: `function "delete-everything" is not one this installation invokes; name one of: resize, ` + arn},
		{name: "none allowed", spec: oneStage("resize"),
			field: "stages[0].lambda", msg: `function "resize" is not one this installation invokes; the operator allows none`},
		{name: "the name of an allowed ARN", spec: oneStage("scorer"), allowed: allowed,
			field: "stages[0].lambda", msg: `function "scorer" is not one`},
		{name: "the ARN of an allowed name", spec: oneStage("arn:aws:lambda:eu-west-1:123456789012:function:resize"), allowed: allowed,
			field: "stages[0].lambda", msg: `is not one`},
		{name: "an allowed name in another account", spec: oneStage("arn:aws:lambda:eu-west-1:999999999999:function:scorer"), allowed: allowed,
			field: "stages[0].lambda", msg: `is not one`},
		{name: "a name extending an allowed one", spec: oneStage("resize2"), allowed: allowed,
			field: "stages[0].lambda", msg: `is not one`},
		{name: "the second stage", allowed: allowed,
			spec: `{"name":"l","lease":"10s","stages":[{"name":"a","lambda":"resize","partitions":{"count":1}},` +
				`{"name":"b","lambda":"other","partitions":{"count":1}}]}`,
			field: "stages[1].lambda", msg: `function "other" is not one`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := newUnitRig(t, func(cfg *Config) { cfg.TaskFunctions = c.allowed })
			_, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: "alice", IdempotencyKey: "k", Spec: []byte(c.spec)})
			if c.field == "" {
				if err != nil {
					t.Fatalf("submit: %v", err)
				}
				return
			}
			var fe *spec.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field || !strings.Contains(fe.Message, c.msg) {
				t.Fatalf("submit: %v, want a field error on %s containing %q", err, c.field, c.msg)
			}
			if n := r.store.JobItems(); n != 0 {
				t.Fatalf("%d records written for a refused spec", n)
			}
		})
	}
}

func TestParseTaskFunctions(t *testing.T) {
	t.Parallel()
	got, err := ParseTaskFunctions(" resize, arn:aws:lambda:eu-west-1:123456789012:function:scorer\nresize ")
	if d := cmp.Diff([]string{"resize", "arn:aws:lambda:eu-west-1:123456789012:function:scorer"}, got); err != nil || d != "" {
		t.Errorf("ParseTaskFunctions: %v (-want +got):\n%s", err, d)
	}
	if got, err := ParseTaskFunctions(""); err != nil || got != nil {
		t.Errorf("empty: %v, %v; want none", got, err)
	}
	for _, bad := range []string{"not/a/function", "resize:live", "arn:aws:lambda:eu-west-1:123456789012:function:scorer:3"} {
		if _, err := ParseTaskFunctions("ok," + bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", bad)) {
			t.Errorf("entry %s: %v, want an error naming it", bad, err)
		}
	}
}
