package orderid_test

import (
	"strings"
	"testing"

	"github.com/seckill/seckill/internal/orderid"
)

func codec(t *testing.T, hexKey string) *orderid.Codec {
	t.Helper()
	k, err := orderid.ParseKey(hexKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := orderid.New(k)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestRoundTripAndOpacity(t *testing.T) {
	c := codec(t, "000102030405060708090a0b0c0d0e0f") // fixed: the prefix check is deterministic
	other := codec(t, orderid.RandomKey())
	seen := map[string]bool{}
	prev := ""
	for id := int64(1); id <= 2000; id++ {
		s := c.Encode(id)
		if len(s) != orderid.Len {
			t.Fatalf("Encode(%d) = %q; want %d characters", id, s, orderid.Len)
		}
		if got, ok := c.Decode(s); !ok || got != id {
			t.Fatalf("Decode(Encode(%d)) = %d, %v", id, got, ok)
		}
		if _, ok := other.Decode(s); ok {
			t.Fatalf("id %q of %d decodes under another key", s, id)
		}
		if seen[s] {
			t.Fatalf("Encode(%d) = %q repeats an earlier id", id, s)
		}
		seen[s] = true
		// Consecutive ids share no prefix beyond chance: nothing sequential shows.
		if prev != "" && s[:4] == prev[:4] {
			t.Errorf("ids of %d and %d share the prefix %q", id-1, id, s[:4])
		}
		prev = s
	}
}

func TestDecodeRefusesForgeries(t *testing.T) {
	c := codec(t, strings.Repeat("ab", 16))
	good := c.Encode(42)
	flipped := []byte(good)
	flipped[3] ^= 1
	for _, s := range []string{"", "1", "42", good[:21], good + "A", string(flipped), strings.Repeat("A", 22), strings.Repeat("!", 22)} {
		if id, ok := c.Decode(s); ok {
			t.Errorf("Decode(%q) = %d, true; want false", s, id)
		}
	}
	for _, k := range []string{"", "xyz", strings.Repeat("a", 31), strings.Repeat("a", 34)} {
		if _, err := orderid.ParseKey(k); err == nil {
			t.Errorf("ParseKey(%q) = nil error; want an error", k)
		}
	}
}
