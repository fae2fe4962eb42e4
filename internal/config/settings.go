package config

import (
	"fmt"
	"math"
	"net"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

//go:generate go run ./gen ../../docs/configuration.md

// A setting is declared once, by the tags of its Config field:
//
//	yaml     its key in the file (the path joins the keys with dots)
//	default  its default, written as in the environment
//	help     one line for `seckill -h` and docs/configuration.md
//	env      its variable, when not SECKILL_ + the path in capitals with _
//	valid    ">0", ">=X", "A..B" (inclusive), "addr" (host:port, when set)
//	         or "a|b|c" (one of; an empty alternative allows unset)
//	secret   "true" for a credential: deployments take it from a secret
//	         store, never from a ConfigMap (deploy/kubernetes_test.go)
//
// Lists are comma-separated in the environment; an empty variable is unset.
// Rules that tie settings together are code, in Validate.

// Setting describes one setting, as its tags declare it.
type Setting struct {
	Key     string // yaml path, e.g. mysql.max_open_conns
	Env     string // e.g. SECKILL_MYSQL_MAX_OPEN_CONNS
	Default string // as written in the environment; "" when none
	Help    string
	Secret  bool // its secret tag: a credential
	valid   string
	index   []int
}

// settings lists every setting in the order of Config's fields.
var settings = collect(reflect.TypeOf(Config{}), "", nil)

// Settings returns every setting, in the order of Config's fields.
func Settings() []Setting { return append([]Setting(nil), settings...) }

func collect(t reflect.Type, prefix string, index []int) []Setting {
	var out []Setting
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "" || name == "-" {
			continue
		}
		key := strings.TrimPrefix(prefix+"."+name, ".")
		idx := append(append([]int(nil), index...), i)
		if f.Type.Kind() == reflect.Struct {
			out = append(out, collect(f.Type, key, idx)...)
			continue
		}
		env := f.Tag.Get("env")
		if env == "" {
			env = "SECKILL_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		}
		out = append(out, Setting{Key: key, Env: env, Default: f.Tag.Get("default"),
			Help: f.Tag.Get("help"), Secret: f.Tag.Get("secret") == "true", valid: f.Tag.Get("valid"), index: idx})
	}
	return out
}

// defaults returns a Config filled from the default tags (afresh: a
// list default must not be shared between callers).
func defaults() Config {
	var c Config
	for _, s := range settings {
		if s.Default == "" {
			continue
		}
		if err := parseInto(c.field(s), s.Default); err != nil {
			panic(fmt.Sprintf("config: %s: default %q: %v", s.Key, s.Default, err))
		}
	}
	return c
}

func (c *Config) field(s Setting) reflect.Value {
	return reflect.ValueOf(c).Elem().FieldByIndex(s.index)
}

// applyEnv sets every setting whose variable is set.
func (c *Config) applyEnv(getenv func(string) string) error {
	for _, s := range settings {
		if v := getenv(s.Env); v != "" {
			f := c.field(s)
			if err := parseInto(f, v); err != nil {
				return fmt.Errorf("config: %s=%q: want %s", s.Env, v, want(f.Type()))
			}
		}
	}
	return nil
}

// parseInto sets v from its text form: durations like 3s, lists
// comma-separated (blank items dropped).
func parseInto(v reflect.Value, s string) error {
	if v.Type() == durationType {
		d, err := time.ParseDuration(s)
		v.SetInt(int64(d))
		return err
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		v.SetBool(b)
		return err
	case reflect.Int, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, 64)
		v.SetInt(n)
		return err
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		v.SetFloat(f)
		return err
	case reflect.Slice:
		var items []string
		for _, it := range strings.Split(s, ",") {
			if it = strings.TrimSpace(it); it != "" {
				items = append(items, it)
			}
		}
		v.Set(reflect.ValueOf(items))
	default:
		return fmt.Errorf("unsupported type %s", v.Type())
	}
	return nil
}

// validateTags checks every setting against its valid tag.
func (c Config) validateTags() error {
	for _, s := range settings {
		if s.valid == "" {
			continue
		}
		if err := check(c.field(s), s.valid); err != nil {
			return fmt.Errorf("config: %s (%s) %v", s.Key, s.Env, err)
		}
	}
	return nil
}

func check(v reflect.Value, rule string) error {
	if rule == "addr" {
		addrs := []string{v.String()}
		if v.Kind() == reflect.Slice {
			addrs = v.Interface().([]string)
		}
		for _, a := range addrs {
			if _, _, err := net.SplitHostPort(a); a != "" && err != nil {
				return fmt.Errorf("%q: %v", a, err)
			}
		}
		return nil
	}
	if strings.Contains(rule, "|") {
		one := strings.Split(rule, "|")
		if !slices.Contains(one, v.String()) {
			return fmt.Errorf("%q: want one of %s", v.String(), strings.Join(slices.DeleteFunc(one, func(s string) bool { return s == "" }), ", "))
		}
		return nil
	}
	x := number(v)
	bound := func(s string) float64 {
		b := reflect.New(v.Type()).Elem()
		if err := parseInto(b, s); err != nil {
			panic(fmt.Sprintf("config: valid:%q: %v", rule, err))
		}
		return number(b)
	}
	switch {
	case rule == ">0":
		if x <= 0 {
			return fmt.Errorf("must be positive")
		}
	case rule == ">=0":
		if x < 0 {
			return fmt.Errorf("must not be negative")
		}
	case strings.HasPrefix(rule, ">="):
		if x < bound(rule[2:]) {
			return fmt.Errorf("must be at least %s", rule[2:])
		}
	case strings.Contains(rule, ".."):
		lo, hi, _ := strings.Cut(rule, "..")
		if x < bound(lo) || x > bound(hi) {
			return fmt.Errorf("must be between %s and %s", lo, hi)
		}
	default:
		panic(fmt.Sprintf("config: unknown valid:%q", rule))
	}
	return nil
}

// Allowed says in words what the valid tag allows; "" when it is unchecked.
func (s Setting) Allowed() string {
	r := s.valid
	switch {
	case r == "":
		return ""
	case r == ">0":
		return "positive"
	case r == ">=0":
		return "0 or more"
	case r == "addr":
		return "host:port"
	case strings.HasPrefix(r, ">="):
		return "at least " + r[2:]
	case strings.Contains(r, "|"):
		return strings.Join(slices.DeleteFunc(strings.Split(r, "|"), func(s string) bool { return s == "" }), ", ")
	}
	return strings.Replace(r, "..", " to ", 1)
}

// Type is the setting's Go type: time.Duration, int, int64, float64,
// bool, string or []string.
func (s Setting) Type() reflect.Type {
	return reflect.TypeOf(Config{}).FieldByIndex(s.index).Type
}

// Bounds returns the least and the greatest value the valid tag accepts
// for a number or a duration (in nanoseconds): ">0" accepts from 1 (1ns)
// for an integer type, and a tag with no upper bound gives hi +Inf. ok is
// false when the tag bounds no number.
func (s Setting) Bounds() (lo, hi float64, ok bool) {
	r, t := s.valid, s.Type()
	if t.Kind() == reflect.String || t.Kind() == reflect.Slice || t.Kind() == reflect.Bool {
		return 0, 0, false
	}
	bound := func(text string) float64 {
		b := reflect.New(t).Elem()
		if err := parseInto(b, text); err != nil {
			panic(fmt.Sprintf("config: %s: valid:%q: %v", s.Key, r, err))
		}
		return number(b)
	}
	switch {
	case r == ">0" && t.Kind() != reflect.Float64:
		return 1, math.Inf(1), true
	case r == ">=0":
		return 0, math.Inf(1), true
	case strings.HasPrefix(r, ">=") && r != ">=0":
		return bound(r[2:]), math.Inf(1), true
	case strings.Contains(r, ".."):
		a, b, _ := strings.Cut(r, "..")
		return bound(a), bound(b), true
	}
	return 0, 0, false
}

func number(v reflect.Value) float64 {
	if v.Kind() == reflect.Float64 {
		return v.Float()
	}
	return float64(v.Int())
}

// Usage is the settings list of `seckill -h`: each variable with its key
// and default, then its help.
func Usage() string {
	var b strings.Builder
	for _, s := range settings {
		def := s.Default
		if def == "" {
			def = "none"
		}
		if r := s.Allowed(); r != "" {
			def += "; " + r
		}
		fmt.Fprintf(&b, "  %s (%s, default %s)\n        %s\n", s.Env, s.Key, def, s.Help)
	}
	return b.String()
}

// Markers of the generated settings table in docs/configuration.md.
const (
	tableBegin = "<!-- settings:begin: generated by go generate ./internal/config; do not edit -->"
	tableEnd   = "<!-- settings:end -->"
)

// markdownTable is the settings table of docs/configuration.md.
func markdownTable() string {
	var b strings.Builder
	b.WriteString("| key | env | default | allowed | meaning |\n|---|---|---|---|---|\n")
	for _, s := range settings {
		def := "none"
		if s.Default != "" {
			def = "`" + s.Default + "`"
		}
		fmt.Fprintf(&b, "| `%s` | `%s` | %s | %s | %s |\n", s.Key, s.Env, def, s.Allowed(), strings.ReplaceAll(s.Help, "|", `\|`))
	}
	return b.String()
}

// WithSettingsTable returns doc with the text between its settings markers
// replaced by the table generated from the tags.
func WithSettingsTable(doc string) (string, error) {
	before, rest, ok := strings.Cut(doc, tableBegin)
	_, after, ok2 := strings.Cut(rest, tableEnd)
	if !ok || !ok2 {
		return "", fmt.Errorf("config: the settings markers %q and %q are missing", tableBegin, tableEnd)
	}
	return before + tableBegin + "\n" + markdownTable() + tableEnd + after, nil
}
