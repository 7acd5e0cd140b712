package kernel

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// MaxOwnerConcurrency caps an owner's limit. An owner's slots are one
// item (OWN#<owner>/SLOTS) holding ~40 bytes per running task, so at
// 1,000 it is ~40 KB: far under DynamoDB's 400 KB item limit, but every
// acquire and release is billed by the item's size, ~40 WCUs each at
// 1,000 holders (~80 per task, $0.00005 at $0.625 per million), and one
// item takes at most 1,000 WCU/s, so a full 1,000-slot map admits ~12
// claims a second. A larger cap would buy running tasks with claim
// throughput; an owner that needs more should not be limited this way.
const MaxOwnerConcurrency = 1000

// OwnerLimits caps the tasks each owner runs at once, across its jobs. It
// is operator configuration (an owner cannot raise its own cap). 0 means
// no limit.
type OwnerLimits struct {
	// Default applies to every owner without an override.
	Default int
	// Owners are per-owner overrides, by owner (the IAM principal ARN the
	// API authenticated, as stored on the job).
	Owners map[string]int
}

// For is owner's limit; 0 is none.
func (l OwnerLimits) For(owner string) int {
	if n, ok := l.Owners[owner]; ok {
		return n
	}
	return l.Default
}

// Any says whether some owner may have a limit, so that an installation
// without owner limits spends nothing on them.
func (l OwnerLimits) Any() bool {
	if l.Default > 0 {
		return true
	}
	for _, n := range l.Owners {
		if n > 0 {
			return true
		}
	}
	return false
}

// String is the limits in ParseOwnerLimits's format, default first.
func (l OwnerLimits) String() string {
	var parts []string
	if l.Default > 0 {
		parts = append(parts, "*="+strconv.Itoa(l.Default))
	}
	owners := make([]string, 0, len(l.Owners))
	for o := range l.Owners {
		owners = append(owners, o)
	}
	sort.Strings(owners)
	for _, o := range owners {
		parts = append(parts, o+"="+strconv.Itoa(l.Owners[o]))
	}
	return strings.Join(parts, ",")
}

// ParseOwnerLimits reads owner limits from one string: entries
// `owner=limit` separated by commas or whitespace, where owner `*` is the
// default for every owner not named, and a limit is 0 (none) to
// MaxOwnerConcurrency. For example
//
//	*=200,arn:aws:iam::123456789012:role/etl=10 arn:aws:sts::123456789012:assumed-role/ci/build=50
//
// An entry is split at its last `=`, so an owner may contain `=` (IAM
// names may); an owner cannot contain a comma or whitespace (IAM names
// may contain commas: such an owner gets the default). The empty string
// is no limits. The error names the bad entry; callers name the setting.
func ParseOwnerLimits(s string) (OwnerLimits, error) {
	return parseOwnerValues(s, MaxOwnerConcurrency)
}

// MaxQuota bounds a quota's value (admission/quotas.go).
const MaxQuota = 100_000_000

// ParseOwnerQuota reads one of the owners' quotas, in ParseOwnerLimits's
// format, with values up to MaxQuota.
func ParseOwnerQuota(s string) (OwnerLimits, error) {
	return parseOwnerValues(s, MaxQuota)
}

func parseOwnerValues(s string, maxValue int) (OwnerLimits, error) {
	l := OwnerLimits{}
	seen := map[string]bool{}
	for _, entry := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' || r == '\r' }) {
		i := strings.LastIndexByte(entry, '=')
		if i < 0 {
			return OwnerLimits{}, fmt.Errorf("entry %q: want owner=limit (owner * for the default)", entry)
		}
		owner, num := entry[:i], entry[i+1:]
		if owner == "" {
			return OwnerLimits{}, fmt.Errorf("entry %q: no owner before =", entry)
		}
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 || n > maxValue {
			return OwnerLimits{}, fmt.Errorf("entry %q: limit %q is not a whole number from 0 (no limit) to %d", entry, num, maxValue)
		}
		if seen[owner] {
			return OwnerLimits{}, fmt.Errorf("entry %q: owner %s is given twice", entry, owner)
		}
		seen[owner] = true
		if owner == "*" {
			l.Default = n
			continue
		}
		if l.Owners == nil {
			l.Owners = map[string]int{}
		}
		l.Owners[owner] = n
	}
	return l, nil
}
