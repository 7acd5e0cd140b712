package ddbwire

import (
	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/batchwork/batchwork/shared/awswire"
)

// Call, Send and Hook are the lean clients' hook port, shared with the
// other services' lean clients (shared/awswire): a hook installed once
// sees the calls of all of them, told apart by Call.Service.
type (
	Call = awswire.Call
	Send = awswire.Send
	Hook = awswire.Hook
)

// Install is awswire.Install: h sees the calls of every lean client made
// from cfg afterwards.
func Install(cfg *aws.Config, h Hook) { awswire.Install(cfg, h) }

// Hooks returns the hooks installed on cfg.
func Hooks(cfg aws.Config) []Hook { return awswire.Hooks(cfg) }
