package blob

import "testing"

func TestBadRecordsKeyRoundTrip(t *testing.T) {
	job := "j0123"
	k := BadRecordsKey(job, "parse", 42, 3)
	if k != "jobs/j0123/badrecords/parse/p000042/a3.jsonl" {
		t.Fatalf("key %q", k)
	}
	cases := []struct {
		key  string
		ok   bool
		part int
	}{
		{k, true, 42},
		{"jobs/j0123/badrecords/parse/p000042/a3.jsonl.tmp", false, 0},
		{"jobs/j0123/badrecords/parse/p42/a3.jsonl", false, 0},
		{"jobs/j0123/out/parse/p000042/a3/part-00000", false, 0},
		{"jobs/other/badrecords/parse/p000042/a3.jsonl", false, 0},
		{"jobs/j0123/badrecords//p000042/a3.jsonl", false, 0},
	}
	for _, tc := range cases {
		stage, part, att, ok := ParseBadRecordsKey(job, tc.key)
		if ok != tc.ok || ok && (stage != "parse" || part != tc.part || att != 3) {
			t.Errorf("%q: %q %d %d %v, want ok %v", tc.key, stage, part, att, ok, tc.ok)
		}
	}
}
