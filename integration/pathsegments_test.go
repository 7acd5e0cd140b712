package integration

import (
	"net/http"
	"strings"
	"testing"

	"github.com/batchwork/batchwork/shared/batchwork"
)

// A "." , ".." or empty segment in an input prefix or an output folder is
// a 400 naming the field, and nothing is written: S3 would store
// outputs:../x/ literally, and every tool mapping keys to paths would
// read it somewhere else.
func TestDotSegmentsAreRefusedBySubmit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, batchwork.NewRegistry(), envOptions{noRun: true})
	cases := []struct {
		name, spec, field, says string
	}{
		{"output dotdot", `{"name":"x","output":"outputs:../x/","stages":[{"name":"a","task":"t","partitions":{"count":1}}]}`,
			"output", `".." segment`},
		{"input dot", `{"name":"x","stages":[{"name":"a","task":"t","partitions":{"input":{"prefix":"inputs:corpus/./a/"}}}]}`,
			"stages[0].partitions.input.prefix", `"." segment`},
		{"input empty", `{"name":"x","stages":[{"name":"a","task":"t","partitions":{"input":{"prefix":"inputs:corpus//a/"}}}]}`,
			"stages[0].partitions.input.prefix", "empty segment"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := e.call("tester", http.MethodPost, "/jobs", []byte(tc.spec), "Idempotency-Key", "seg-"+strings.ReplaceAll(tc.name, " ", "-"))
			ae := r.apiErr(t)
			if r.Status != http.StatusBadRequest || ae.Code != "invalid_spec" || ae.Field != tc.field || !strings.Contains(ae.Message, tc.says) {
				t.Fatalf("got %d %+v; want 400 invalid_spec on %q saying %s", r.Status, ae, tc.field, tc.says)
			}
		})
	}
	assertEmpty(t, e)
}
