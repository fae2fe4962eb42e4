package service_test

import (
	"testing"

	"github.com/seckill/seckill/service"
)

func TestIDProblem(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id string
		ok bool
	}{
		{"u-1", true},
		{"u 1", true},
		{"käufer-用户-😀", true},
		{"", false},
		{"u-1 ", false},
		{" u-1", false},
		{"u-1\t", false},
		{"u-1\u00a0", false},
		{"u-1\u3000", false},
		{"u\x00-1", false},
		{"u\x7f-1", false},
		{"u\u0085-1", false},
		{"u-\xff", false},
	}
	for _, tt := range tests {
		if p := service.IDProblem(tt.id); (p == "") != tt.ok {
			t.Errorf("IDProblem(%q) = %q; want ok %v", tt.id, p, tt.ok)
		}
	}
	r := service.OrderRequest{SKUID: 1, UserID: "alice ", Quantity: 1}
	if err := r.Validate(); err == nil {
		t.Errorf("Validate(user %q) = nil; want ErrInvalid", r.UserID)
	}
	r = service.OrderRequest{SKUID: 1, UserID: "alice", Quantity: 1, IdempotencyKey: "k\n"}
	if err := r.Validate(); err == nil {
		t.Errorf("Validate(key %q) = nil; want ErrInvalid", r.IdempotencyKey)
	}
}
