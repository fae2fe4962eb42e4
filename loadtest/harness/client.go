package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/seckill/seckill/internal/auth"
	"github.com/seckill/seckill/internal/config"
)

// admin sends an admin API request and decodes its answer into v (if not
// nil); an answer other than want is an error with its body.
func (r *run) admin(ctx context.Context, method, url, body string, want int, v any) error {
	p, err := r.send(ctx, method, url, body, r.token)
	switch {
	case err != nil:
		return err
	case p.status != want:
		return fmt.Errorf("%s %s: %d: %s", method, url, p.status, bytes.TrimSpace(p.body))
	case v == nil:
		return nil
	}
	return json.Unmarshal(p.body, v)
}

// createSKU creates a SKU through the first instance's admin API.
func (r *run) createSKU(ctx context.Context, name string, stock, perUserLimit int64) (int64, error) {
	body, _ := json.Marshal(map[string]any{"name": name, "stock": stock, "per_user_limit": perUserLimit})
	var out struct {
		ID int64 `json:"id"`
	}
	if err := r.admin(ctx, http.MethodPost, r.baseURLs[0]+"/admin/v1/skus", string(body), http.StatusCreated, &out); err != nil {
		return 0, fmt.Errorf("create sku: %w", err)
	}
	if out.ID == 0 {
		return 0, errors.New("create sku: the answer has no id")
	}
	return out.ID, nil
}

// orderAnswer is the part of an order's answer the runner reads.
type orderAnswer struct {
	OrderID  string `json:"order_id"`
	Status   string `json:"status"`
	Position int64  `json:"position"`
	Error    struct {
		Code string `json:"code"`
	} `json:"error"`
}

// reply is an answer to a request the runner sent.
type reply struct {
	status     int
	body       []byte        // its first 16 MiB
	retryAfter time.Duration // what it asked for, 1s when it named none
	etag       string
}

// answer decodes the body as an order's answer (zero if it is not one).
func (p reply) answer() orderAnswer {
	var a orderAnswer
	_ = json.Unmarshal(p.body, &a)
	return a
}

// send sends a JSON request with the bearer token and the headers of hdr
// (name, value, ...) whose value is not empty.
func (r *run) send(ctx context.Context, method, url, body, token string, hdr ...string) (reply, error) {
	p := reply{retryAfter: time.Second}
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		return p, err
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		hdr = append(hdr, "Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		if hdr[i+1] != "" {
			req.Header.Set(hdr[i], hdr[i+1])
		}
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return p, err
	}
	defer resp.Body.Close()
	p.status, p.etag = resp.StatusCode, resp.Header.Get("ETag")
	if s, perr := strconv.Atoi(resp.Header.Get("Retry-After")); perr == nil && s >= 0 {
		p.retryAfter = time.Duration(s) * time.Second
	}
	p.body, err = io.ReadAll(io.LimitReader(resp.Body, 16<<20)) // /metrics is the largest
	return p, err
}

// metric reads one series (name and labels, then a space) from instance
// i's /metrics; found is false when the instance does not show it.
func (r *run) metric(ctx context.Context, i int, series string) (v float64, found bool, err error) {
	p, err := r.send(ctx, http.MethodGet, r.baseURLs[i]+"/metrics", "", "")
	if err != nil {
		return 0, false, err
	}
	for line := range strings.Lines(string(p.body)) {
		if rest, ok := strings.CutPrefix(line, series); ok {
			v, err := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v, true, err
		}
	}
	return 0, false, nil
}

// metricSum sums series over the instances; one that does not answer
// counts nothing.
func (r *run) metricSum(ctx context.Context, series string) int64 {
	var n float64
	for i := range r.baseURLs {
		mctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		v, _, _ := r.metric(mctx, i, series)
		cancel()
		n += v
	}
	return int64(n)
}

// shopperToken is the bearer token of shopper sub, signed with the run's
// auth.jwt.secret as the identity provider would; none without a secret
// (target mode against auth.shopper none).
func (r *run) shopperToken(sub string) (string, error) {
	if r.shopper == "" {
		return "", nil
	}
	return auth.Mint([]byte(r.shopper), auth.Claims{Subject: sub, Audience: config.Default().Auth.JWT.Audience, TTL: time.Hour}, time.Now())
}
