package cli

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"

	"github.com/batchwork/batchwork/cmd/batchwork/termsafe"
)

// paramFlag collects submit's repeatable --param NAME=VALUE.
type paramFlag struct{ m map[string]string }

func (p *paramFlag) String() string { return "" }

func (p *paramFlag) Set(v string) error {
	name, val, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("%q must be NAME=VALUE", v)
	}
	if _, dup := p.m[name]; dup {
		return fmt.Errorf("%s is given twice", name)
	}
	if p.m == nil {
		p.m = map[string]string{}
	}
	p.m[name] = val
	return nil
}

// printParams writes a job's run parameters, in name order, on one row
// of the status table.
func printParams(w io.Writer, params map[string]string) {
	if len(params) == 0 {
		return
	}
	parts := make([]string, 0, len(params))
	for _, k := range slices.Sorted(maps.Keys(params)) {
		parts = append(parts, termsafe.Text(k)+"="+termsafe.Text(params[k]))
	}
	fmt.Fprintf(w, "Params:\t%s\n", strings.Join(parts, " "))
}
