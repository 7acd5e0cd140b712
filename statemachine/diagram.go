package statemachine

import (
	"fmt"
	"strings"
)

// Markdown renders all three lifecycles as the document docs/lifecycles.md.
// A test fails when the checked-in file differs, so the diagram cannot drift
// from the tables; `make docs` rewrites it.
func Markdown() string {
	var b strings.Builder
	b.WriteString("# Lifecycles\n\n")
	b.WriteString("Generated from `statemachine/lifecycles.go` by `make docs`; do not edit by hand.\n")
	b.WriteString("Labels are `event [guards]`. Every status-changing DynamoDB write takes its condition from these tables.\n")
	section(&b, "Job", Jobs)
	section(&b, "Stage", Stages)
	section(&b, "Task", Tasks)
	return b.String()
}

func section[S ~string](b *strings.Builder, title string, m Machine[S]) {
	fmt.Fprintf(b, "\n## %s\n\n```mermaid\n%s```\n", title, m.Mermaid())
}
