package config

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// explainYAML turns yaml.v3's type errors ("cannot unmarshal !!int `3`
// into time.Duration") into one naming the key and what it wants:
// "line 5: lock.ttl: want a duration like 3s, got 3". Other errors are
// returned as they are.
func explainYAML(raw []byte, err error) error {
	var doc yaml.Node
	if yaml.Unmarshal(raw, &doc) != nil || len(doc.Content) == 0 {
		return err
	}
	if msg := badValue(doc.Content[0], reflect.TypeOf(Config{}), ""); msg != "" {
		return fmt.Errorf("%s", msg)
	}
	return err
}

var durationType = reflect.TypeOf(time.Duration(0))

// badValue finds the first value under n that does not decode into t.
func badValue(n *yaml.Node, t reflect.Type, key string) string {
	if t.Kind() == reflect.Struct && n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			name := n.Content[i].Value
			for f := 0; f < t.NumField(); f++ {
				tag, _, _ := strings.Cut(t.Field(f).Tag.Get("yaml"), ",")
				if tag != name {
					continue
				}
				if msg := badValue(n.Content[i+1], t.Field(f).Type, strings.TrimPrefix(key+"."+name, ".")); msg != "" {
					return msg
				}
			}
		}
		return ""
	}
	if err := n.Decode(reflect.New(t).Interface()); err == nil {
		return ""
	}
	got := n.Value
	if n.Kind != yaml.ScalarNode {
		got = "a " + map[yaml.Kind]string{yaml.MappingNode: "mapping", yaml.SequenceNode: "list"}[n.Kind]
	}
	return fmt.Sprintf("line %d: %s: want %s, got %s", n.Line, key, want(t), got)
}

func want(t reflect.Type) string {
	if t == durationType {
		return "a duration like 3s or 200ms"
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.Bool:
		return "true or false"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list of " + strings.TrimPrefix(want(t.Elem()), "a ") + "s"
	case reflect.Struct:
		return "a mapping"
	}
	return t.String()
}
