package control

import (
	"errors"
	"testing"

	"github.com/batchwork/batchwork/shared/spec"
)

// The allow-list the construct deploys when the operator names no owner
// (NoHighPriorityOwners) refuses priority "high" to every owner, with an
// error naming the field; "normal" and "low" are unaffected, and an owner
// the operator names may use "high".
func TestHighPriorityIsRefusedToOwnersNotNamed(t *testing.T) {
	const owner, ops = "arn:aws:iam::123456789012:role/etl", "arn:aws:iam::123456789012:role/ops"
	cases := []struct {
		name      string
		allowed   string
		owner     string
		spec      string
		wantField string // "" for accepted
	}{
		{"job high, nobody named", NoHighPriorityOwners, owner, oneStage(1, 1, `,"priority":"high"`), "priority"},
		{"stage high, nobody named", NoHighPriorityOwners, owner,
			`{"name":"unit","stages":[{"name":"s","task":"work","priority":"high","partitions":{"count":1}}]}`, "stages[0].priority"},
		{"normal, nobody named", NoHighPriorityOwners, owner, oneStage(1, 1, `,"priority":"normal"`), ""},
		{"low, nobody named", NoHighPriorityOwners, owner, oneStage(1, 1, `,"priority":"low"`), ""},
		{"job high, another owner named", ops, owner, oneStage(1, 1, `,"priority":"high"`), "priority"},
		{"job high, owner named", ops + "," + NoHighPriorityOwners, ops, oneStage(1, 1, `,"priority":"high"`), ""},
		{"job high, every owner", "*", owner, oneStage(1, 1, `,"priority":"high"`), ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newUnitRig(t, func(cfg *Config) { cfg.Quotas.HighPriority = ParseHighPriorityOwners(c.allowed) })
			_, err := r.svc.Submit(r.ctx, SubmitRequest{Owner: c.owner, IdempotencyKey: "k", Spec: []byte(c.spec)})
			var fe *spec.FieldError
			switch {
			case c.wantField == "" && err != nil:
				t.Fatalf("submit: %v, want it accepted", err)
			case c.wantField != "" && (!errors.As(err, &fe) || fe.Field != c.wantField):
				t.Fatalf("submit: %v, want a field error on %s", err, c.wantField)
			case c.wantField != "" && fe.Message != `"high" is reserved by the operator; use "normal" or "low"`:
				t.Fatalf("submit: message %q, want one saying high is reserved", fe.Message)
			}
		})
	}
}
