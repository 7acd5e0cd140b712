package spec

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse checks that Parse never panics, always reports failure as a
// *ValidationError, and that every accepted spec survives the trip through
// its stored JSON form unchanged.
func FuzzParse(f *testing.F) {
	seeds := []string{
		wordCountYAML,
		wordCountJSON,
		diamondYAML,
		`{"name":"j","stages":[{"name":"s","task":"t","partitions":{"count":1,"params":[{"k":"a\/b \ud83d\ude00 <&>"}]}}]}`,
		"name: j\nstages:\n  - {name: s, task: t, partitions: {count: 1}, lease: 1h, retry: {maxAttempts: 2, backoff: 1.5s}}\n",
		"name: j\nstages:\n  - &s {name: a, task: t, partitions: &p {count: 2, params: [{}, ~]}}\n  - {<<: *s, name: b, after: [a]}\n",
		"name: j\nstages:\n  - {name: a, task: t, partitions: {input: {prefix: 's3://bucket', splitSize: '1 KB'}}, shuffle: {partitions: 3}}\n  - {name: b, task: t, after: [a]}\n",
		"name: j\nstages:\n  - {name: a, task: t, after: [b], partitions: {count: 1}}\n  - {name: b, task: t, after: [a], partitions: {count: 1}}\n",
		"name: j\nstages: []\ncolour: red\n",
		"name: [j]\nstages:\n  - name: s\n   task: t\n",
		"&a {<<: *a}",
		"- a\n- b\n",
		"name: j\n---\nname: k\n",
		"",
		"null",
		`{"name":"j","stages":[{"name":"s","task":"t","partitions":{"count":18446744073709551616}}]}`,
		"name: j\nstages:\n  - {name: s, task: t, partitions: {count: 0x10}, lease: \"-1s\", priority: HIGH}\n",
		"name: \"\\x00\\u2028\"\nstages: [{name: s, task: t, partitions: {count: 1, params: [{\"\\t\": \"\\x7f\"}]}}]\n",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := Parse(data)
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Errors) == 0 {
				t.Fatalf("Parse error %v (%T) is not a non-empty *ValidationError", err, err)
			}
			return
		}
		b, err := j.Encode()
		if err != nil {
			t.Fatalf("Encode of a parsed job: %v", err)
		}
		again, err := Parse(b)
		if err != nil {
			t.Fatalf("Parse(Encode(j)) = %v\nencoded: %s", err, b)
		}
		if diff := cmp.Diff(j, again); diff != "" {
			t.Fatalf("round trip mismatch (-first +second):\n%s\nencoded: %s", diff, b)
		}
	})
}
