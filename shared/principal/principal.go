// Package principal turns the IAM principal that API Gateway authenticated
// into a job owner.
//
// Behind API Gateway with IAM auth, a caller using a role is known by its
// STS session ARN, arn:aws:sts::<account>:assumed-role/<role>/<session>,
// and the caller picks the session name. Taken as the owner, anyone who
// may assume the role could act as any owner under it, and mint a new
// owner per session to slip past per-owner limits. So by default the
// owner is the role (arn:aws:iam::<account>:role/<role>; STS session ARNs
// carry no role path), and the session is kept for audit only. An
// operator who wants one owner per session chooses ModeSession.
package principal

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Header carries the authenticated principal itself to the API handler,
// for the audit log, beside the owner it maps to.
const Header = "X-Batchwork-Principal"

// Mode says how a principal maps to an owner.
type Mode string

const (
	// ModeRole: an assumed-role session's owner is its role; every other
	// principal is its own owner. The default.
	ModeRole Mode = "role"
	// ModeSession: every principal ARN is its own owner, sessions too.
	ModeSession Mode = "session"
)

// ParseMode reads a mode setting; empty is ModeRole.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.TrimSpace(s)); m {
	case "", ModeRole:
		return ModeRole, nil
	case ModeSession:
		return ModeSession, nil
	default:
		return "", fmt.Errorf("owner mode %q: want %q or %q", s, ModeRole, ModeSession)
	}
}

// Owner returns the owner of principal arn under mode m.
func Owner(arn string, m Mode) string {
	if m == ModeSession {
		return arn
	}
	// arn:<partition>:sts::<account>:assumed-role/<role>/<session>
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sts" {
		return arn
	}
	res := strings.SplitN(parts[5], "/", 3)
	if len(res) != 3 || res[0] != "assumed-role" || res[1] == "" || parts[4] == "" {
		return arn
	}
	return "arn:" + parts[1] + ":iam::" + parts[4] + ":role/" + res[1]
}

// Key is an owner's part of a storage key: a hash, so that an owner of any
// length (an IAM principal ARN can be 2,048 bytes) makes a short key, and
// no owner's name can collide with another's key layout. The state table
// keys owner records by it (shared/dynamo) and the data bucket keeps each
// owner's inputs under it (blob.InputsPrefix), so one owner has one key
// everywhere.
func Key(owner string) string {
	h := sha256.Sum256([]byte(owner))
	return hex.EncodeToString(h[:16])
}
