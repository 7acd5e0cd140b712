package spec

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// A stage's output format (Stage.Output). A task writes records, one a
// line, as it always does (t.Out in Go, stdout for exec); a stage whose
// output format is parquet has the executor write each output partition
// as one Parquet file of the declared schema instead, each line a JSON
// object that becomes one row (internal/executor/parquetout). Not to be
// confused with the job's output (Job.Output, output.go), the folder the
// job's final outputs are published to: a parquet stage's published
// files are named <stage>/part-<partition>.parquet there.

// StageOutput says how a stage's outputs are written.
type StageOutput struct {
	// Format is one of OutputFormats; "" is OutputLines.
	Format string `json:"format,omitempty"`
	// Schema is the Parquet file's columns, in order (format parquet only).
	Schema []Column `json:"schema,omitempty"`
}

// Output formats (StageOutput.Format).
const (
	OutputLines   = "lines"   // the records as written, one a line
	OutputParquet = "parquet" // one Parquet file per output partition
)

// OutputFormats lists the output formats, default first.
var OutputFormats = []string{OutputLines, OutputParquet}

// IsParquet reports whether a stage with output o writes Parquet.
func (o *StageOutput) IsParquet() bool { return o != nil && o.Format == OutputParquet }

// Column is one column of a Parquet output's schema.
type Column struct {
	Name string `json:"name"`
	// Type is one of ColumnTypes, decimal(p,s), or list<T> of one of them.
	Type string `json:"type"`
	// Nullable lets a record leave the column out or give it null;
	// without it such a record is a bad record.
	Nullable bool `json:"nullable,omitempty"`
}

// Column types. A record gives each as a JSON value:
const (
	ColString    = "string"    // a string (UTF-8)
	ColInt32     = "int32"     // an integer number in int32's range
	ColInt64     = "int64"     // an integer number
	ColFloat     = "float"     // a number (32-bit)
	ColDouble    = "double"    // a number (64-bit)
	ColBoolean   = "boolean"   // true or false
	ColTimestamp = "timestamp" // an RFC 3339 string: TIMESTAMP(MICROS, UTC)
	ColDate      = "date"      // a "YYYY-MM-DD" string: DATE
	ColBinary    = "binary"    // a base64 string (standard alphabet, padded)
	ColDecimal   = "decimal"   // decimal(p,s): a string or a number with at most s decimals
	ColList      = "list"      // list<T>: an array of T, whose elements may not be null
)

// ColumnTypes lists the scalar column types but decimal, which takes its
// precision and scale: decimal(p,s).
var ColumnTypes = []string{ColString, ColInt32, ColInt64, ColFloat, ColDouble, ColBoolean, ColTimestamp, ColDate, ColBinary}

// Limits of a Parquet output's schema.
const (
	MaxOutputColumns    = 1000
	MaxDecimalPrecision = 38
	maxColumnName       = 128
)

// ColumnType is a column's type parsed (ParseColumnType).
type ColumnType struct {
	Kind string // one of the Col constants
	// Precision and Scale of a decimal.
	Precision, Scale int
	// Elem is a list's element type (never a list).
	Elem *ColumnType
}

var (
	decimalPattern = regexp.MustCompile(`^decimal\(\s*(\d{1,3})\s*,\s*(\d{1,3})\s*\)$`)
	columnPattern  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
)

// ParseColumnType parses a column's type.
func ParseColumnType(s string) (ColumnType, error) {
	s = strings.TrimSpace(s)
	if inner, ok := strings.CutPrefix(s, "list<"); ok {
		inner, ok = strings.CutSuffix(inner, ">")
		if !ok {
			return ColumnType{}, fmt.Errorf("%q: a list is written list<T>", s)
		}
		elem, err := ParseColumnType(inner)
		switch {
		case err != nil:
			return ColumnType{}, err
		case elem.Kind == ColList:
			return ColumnType{}, fmt.Errorf("%q: a list's elements must be scalars, not lists", s)
		}
		return ColumnType{Kind: ColList, Elem: &elem}, nil
	}
	if m := decimalPattern.FindStringSubmatch(s); m != nil {
		p, _ := strconv.Atoi(m[1])
		sc, _ := strconv.Atoi(m[2])
		switch {
		case p < 1 || p > MaxDecimalPrecision:
			return ColumnType{}, fmt.Errorf("%q: the precision must be between 1 and %d", s, MaxDecimalPrecision)
		case sc > p:
			return ColumnType{}, fmt.Errorf("%q: the scale must be at most the precision", s)
		}
		return ColumnType{Kind: ColDecimal, Precision: p, Scale: sc}, nil
	}
	for _, t := range ColumnTypes {
		if s == t {
			return ColumnType{Kind: t}, nil
		}
	}
	return ColumnType{}, fmt.Errorf("%q is not a column type; want one of %s, decimal(p,s) or list<T>", s, strings.Join(ColumnTypes, ", "))
}

// checkStageOutput checks stage s's output (at path p).
func checkStageOutput(errs *errorList, p string, s Stage) {
	o := s.Output
	if o == nil {
		return
	}
	f := p + ".output"
	switch {
	case o.Format != "" && o.Format != OutputLines && o.Format != OutputParquet:
		errs.add(f+".format", fmt.Sprintf("%q is not an output format; want lines or parquet", o.Format))
		return
	case !o.IsParquet():
		if o.Schema != nil {
			errs.add(f+".schema", "applies only to format parquet")
		}
		return
	case s.Shuffle != nil:
		errs.add(f+".format", "parquet is for a stage's published outputs; this stage shuffles its records to the stages after it, which read them as key\\tvalue lines: write Parquet from the stage that reads the shuffle")
	case s.Lambda != "":
		errs.add(f+".format", "a lambda stage's function writes its output objects itself, so the executor cannot write them as Parquet: write Parquet from the function, or run the stage as task or exec")
	}
	switch n := len(o.Schema); {
	case n == 0:
		errs.add(f+".schema", "is required for format parquet: a list of columns, each {name, type, nullable}")
	case n > MaxOutputColumns:
		errs.add(f+".schema", fmt.Sprintf("has %d columns; at most %d are allowed", n, MaxOutputColumns))
	}
	seen := make(map[string]int, len(o.Schema))
	for i, c := range o.Schema {
		cf := f + ".schema[" + strconv.Itoa(i) + "]"
		switch {
		case c.Name == "":
			errs.add(cf+".name", "is required")
		case len(c.Name) > maxColumnName || !columnPattern.MatchString(c.Name):
			errs.add(cf+".name", fmt.Sprintf("%q must be at most %d letters, digits and underscores, not starting with a digit", clipName(c.Name), maxColumnName))
		default:
			if first, dup := seen[c.Name]; dup {
				errs.add(cf+".name", fmt.Sprintf("duplicate column %q (also schema[%d])", c.Name, first))
			} else {
				seen[c.Name] = i
			}
		}
		if c.Type == "" {
			errs.add(cf+".type", "is required")
		} else if _, err := ParseColumnType(c.Type); err != nil {
			errs.add(cf+".type", err.Error())
		}
	}
}

func clipName(s string) string {
	if len(s) > 40 {
		return s[:40] + "..."
	}
	return s
}

// stageOutput decodes a stage's output.
func (d *decoder) stageOutput(n *yaml.Node, path string) *StageOutput {
	if isNull(n) {
		return nil
	}
	o := new(StageOutput)
	d.object(n, path, func(key string, v *yaml.Node, p string) bool {
		switch key {
		case "format":
			o.Format = d.str(v, p)
		case "schema":
			if !isNull(v) {
				o.Schema = []Column{} // present but empty is an error
			}
			d.list(v, p, func(e *yaml.Node, ep string) {
				var c Column
				d.object(e, ep, func(key string, v *yaml.Node, p string) bool {
					switch key {
					case "name":
						c.Name = d.str(v, p)
					case "type":
						c.Type = d.str(v, p)
					case "nullable":
						c.Nullable = d.boolean(v, p)
					default:
						return false
					}
					return true
				})
				o.Schema = append(o.Schema, c)
			})
		default:
			return false
		}
		return true
	})
	return o
}
