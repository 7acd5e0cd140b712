package faults

import (
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want string // the rules' String()s, joined by ", "
	}{
		{"", ""},
		{"throttle=0.05,conflict=0.01,lost=0.01", "throttle=0.05, conflict=0.01, lost=0.01"},
		{" DynamoDB.UpdateItem:lost=0.5 ", "DynamoDB.UpdateItem:lost=0.5"},
		{"S3:throttle/SlowDown=0.1", "S3:throttle/SlowDown=0.1"},
		{"DynamoDB.TransactWriteItems:conflict=1#1", "DynamoDB.TransactWriteItems:conflict=1#1"},
		{"*.Transact*:inprogress=0.2", "*.Transact*:inprogress=0.2"},
		{"dynamodb:5XX=0,", "dynamodb:5xx=0"},
		{"chaos", "throttle=0.05, 5xx=0.01, DynamoDB.TransactWriteItems:conflict=0.01, DynamoDB.*Item:conflict=0.01, DynamoDB.TransactWriteItems:inprogress=0.005, lost=0.01, SQS.ReceiveMessage:duplicate=0.02"},
		{"SQS:duplicate=0.1", "SQS:duplicate=0.1"},
	} {
		rules, err := Parse(tc.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tc.in, err)
			continue
		}
		got := make([]string, len(rules))
		for i, r := range rules {
			got[i] = r.String()
		}
		if g := strings.Join(got, ", "); g != tc.want {
			t.Errorf("Parse(%q) = %s, want %s", tc.in, g, tc.want)
		}
		// What String prints, Parse reads back.
		if again, err := Parse(strings.Join(got, ",")); err != nil || len(again) != len(rules) {
			t.Errorf("Parse(String()) of %q: %v", tc.in, err)
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"throttle=0.05,drop=0.1", `entry 2 "drop=0.1": unknown kind "drop"`},
		{"lost", `entry 1 "lost": want kind=rate`},
		{"lost=often", `bad rate "often"`},
		{"lost=1.5", "rate 1.5 is not between 0 and 1"},
		{"lost=1#0", `bad count "0"`},
		{"lost=1#x", `bad count "x"`},
		{":lost=1", "empty service"},
		{"SQS:conflict=0.1", "conflict has no fault for SQS.*"},
		{"DynamoDB.Query:conflict=0.1", "conflict has no fault for DynamoDB.Query"},
		{"S3:throttle/ThrottlingException=0.1", "throttle/ThrottlingException has no fault for S3.*"},
		{"Lambda:throttle=0.1", "throttle has no fault for Lambda.*"},
		{"lost/SlowDown=0.1", "lost/SlowDown has no fault"},
		{"S[3:lost=0.1", "bad pattern"},
	} {
		_, err := Parse(tc.in)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Parse(%q) = %v, want an error with %q", tc.in, err, tc.want)
		}
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(EnvRules, "")
	if inj, err := FromEnv(); inj != nil || err != nil {
		t.Errorf("unset: %v, %v; want nil, nil", inj, err)
	}
	t.Setenv(EnvRules, "off")
	if inj, err := FromEnv(); inj != nil || err != nil {
		t.Errorf("off: %v, %v; want nil, nil", inj, err)
	}

	t.Setenv(EnvRules, "DynamoDB:throttle=0.5,lost=0.01")
	t.Setenv(EnvSeed, "42")
	inj, err := FromEnv()
	if err != nil || inj == nil || inj.Seed() != 42 || !inj.Enabled() {
		t.Fatalf("FromEnv = %v, %v", inj, err)
	}
	if s := inj.String(); !strings.Contains(s, "rule DynamoDB:throttle=0.5") || !strings.Contains(s, "rule lost=0.01") {
		t.Errorf("rules not loaded:\n%s", s)
	}

	t.Setenv(EnvSeed, "")
	if inj, err := FromEnv(); err != nil || inj == nil {
		t.Errorf("no seed: %v, %v; want an injector seeded from the clock", inj, err)
	}

	t.Setenv(EnvSeed, "x")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), EnvSeed) {
		t.Errorf("bad seed: err = %v", err)
	}
	t.Setenv(EnvSeed, "")
	t.Setenv(EnvRules, "lost=2")
	if _, err := FromEnv(); err == nil || !strings.Contains(err.Error(), EnvRules) || !strings.Contains(err.Error(), `"lost=2"`) {
		t.Errorf("bad rules: err = %v", err)
	}
}
