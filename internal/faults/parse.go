package faults

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Environment variables FromEnv reads.
const (
	EnvRules = "BATCHWORK_FAULTS"
	EnvSeed  = "BATCHWORK_FAULTS_SEED"
)

// Chaos returns the preset for chaos runs, every fault AWS produces that
// the injector models: 5% of attempts throttled; 1% answered 500 or 503;
// 1% of transactions cancelled by a conflict; 1% of single-item writes
// refused by a transaction in flight on their item
// (TransactionConflictException); 0.5% of transactions answered
// TransactionInProgressException; 1% of successful responses lost; and
// 2% of received SQS messages delivered again at once to the next
// receiver. Rules fire first-match in this order, so the rates are of the
// attempts the rules before left alone.
func Chaos() []Rule {
	return []Rule{
		{Kind: Throttle, Rate: 0.05},
		{Kind: ServerError, Rate: 0.01},
		{Service: "DynamoDB", Operation: opTransactWrite, Kind: Conflict, Rate: 0.01},
		// UpdateItem, PutItem and DeleteItem (*Item's other matches have
		// no conflict and are skipped).
		{Service: "DynamoDB", Operation: "*Item", Kind: Conflict, Rate: 0.01},
		{Service: "DynamoDB", Operation: opTransactWrite, Kind: InProgress, Rate: 0.005},
		{Kind: Lost, Rate: 0.01},
		{Service: "SQS", Operation: opReceive, Kind: Duplicate, Rate: 0.02},
	}
}

// Parse reads rules from a comma-separated list of entries
//
//	[Service[.Operation]:]kind[/Code]=rate[#count]
//
// e.g. "throttle=0.05,conflict=0.01,lost=0.01" or
// "DynamoDB.UpdateItem:lost=0.5" or "S3:throttle/SlowDown=0.1" or
// "DynamoDB.TransactWriteItems:conflict=1#1" (exactly one conflict). The
// entry "chaos" stands for the Chaos rules. Service and operation may be
// "*" or globs. An error names the entry at fault.
func Parse(s string) ([]Rule, error) {
	var rules []Rule
	for n, entry := range strings.Split(s, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		if strings.EqualFold(entry, "chaos") {
			rules = append(rules, Chaos()...)
			continue
		}
		r, err := parseEntry(entry)
		if err != nil {
			return nil, fmt.Errorf("faults: entry %d %q: %w", n+1, entry, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

func parseEntry(entry string) (Rule, error) {
	var r Rule
	spec := entry
	if target, rest, ok := strings.Cut(entry, ":"); ok {
		spec = rest
		svc, op, _ := strings.Cut(target, ".")
		r.Service, r.Operation = strings.TrimSpace(svc), strings.TrimSpace(op)
		if r.Service == "" {
			return r, errors.New("empty service before ':' (use * for any)")
		}
	}
	kind, value, ok := strings.Cut(spec, "=")
	if !ok {
		return r, errors.New("want kind=rate")
	}
	kind, r.Code, _ = strings.Cut(strings.TrimSpace(kind), "/")
	r.Kind = Kind(strings.ToLower(kind))
	rate, count, hasCount := strings.Cut(strings.TrimSpace(value), "#")
	var err error
	if r.Rate, err = strconv.ParseFloat(rate, 64); err != nil {
		return r, fmt.Errorf("bad rate %q: want a number from 0 to 1", rate)
	}
	if hasCount {
		if r.Count, err = strconv.Atoi(count); err != nil || r.Count < 1 {
			return r, fmt.Errorf("bad count %q: want a whole number above 0", count)
		}
	}
	if err := r.Validate(); err != nil {
		return r, err
	}
	return r, nil
}

// FromEnv returns an injector with the rules in BATCHWORK_FAULTS (see
// Parse) and the seed in BATCHWORK_FAULTS_SEED, or nil when
// BATCHWORK_FAULTS is unset, empty or "off". Without a seed it seeds from
// the clock; the seed is in String, to repeat the run. The methods of a
// nil *Injector do nothing, so a binary opts in with
//
//	inj, err := faults.FromEnv()
//	if err != nil { ... }
//	inj.Install(&cfg)
func FromEnv() (*Injector, error) {
	spec := strings.TrimSpace(os.Getenv(EnvRules))
	if spec == "" || strings.EqualFold(spec, "off") {
		return nil, nil
	}
	rules, err := Parse(spec)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvRules, err)
	}
	seed := time.Now().UnixNano()
	if v := strings.TrimSpace(os.Getenv(EnvSeed)); v != "" {
		if seed, err = strconv.ParseInt(v, 10, 64); err != nil {
			return nil, fmt.Errorf("%s %q: want an integer", EnvSeed, v)
		}
	}
	return New(seed, rules...), nil
}
