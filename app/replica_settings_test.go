package app_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/seckill/seckill/internal/config"
	"github.com/seckill/seckill/internal/testenv"
	"github.com/seckill/seckill/internal/testenv/mariadb"
)

// replicaFixedSeeds run in every `go test`: between them they draw
// mysql.replica_timeout at its least (1ms: 16 and 199) and
// order.request_timeout at its least (10ms: 199), min_replicas 0 (4), 1
// (16, 41, 12) and 2 (47, 199), semi-sync on and off, one replica stalled
// (the other confirms the stall's writes: 12) and both, and sales sold
// out before the stall (refusals during it: 16, 41).
var replicaFixedSeeds = []uint64{16, 47, 4, 199, 41, 12}

// replicaDrawn are the settings drawn from the ranges their tags accept:
// order.request_timeout too, which mysql.replica_timeout must be shorter
// than. order.place_grace and the rest of order.* are drawn by
// TestPlace_AcceptedSettingsAreSafe (engine/settings_test.go).
var replicaDrawn = []string{"mysql.min_replicas", "mysql.replica_timeout", "order.request_timeout"}

// TestReplicaSettings_AcceptedAreSafe is docs/design.md's invariant 17
// for the MariaDB replica settings, held to invariant 18. Per seed,
// mysql.min_replicas (0 to the replicas there are), mysql.replica_timeout
// and order.request_timeout are drawn from the ranges the configuration
// accepts, and the scene: semi-sync on or off, one or both replicas to
// stall, the stock. Two instances sell to 40 buyers and take payments;
// then, the stalled replicas' IO stopped, 16 more buyers come, payments
// and cancels. While the IO is stopped, every order, payment and cancel
// answered 200 or 201 must be on at least min_replicas replicas, and a
// refusal during the stall decided on what as many have (with 0, none of
// the stall's writes may be on a stalled replica: the comparison can see
// a loss). Then the IO runs again, the answers 503 are retried with their
// keys, and the primary must hold every acknowledged write and nothing
// else, one order per buyer, its books balanced; every request gets an
// answer of the contract. One primary and two replicas serve every seed,
// each seed in a database of its own. Seeds: SECKILL_TEST_SETTINGS_SEED,
// SECKILL_TEST_SETTINGS_RUNS (docs/testing.md).
func TestReplicaSettings_AcceptedAreSafe(t *testing.T) {
	ctx := context.Background()
	set, err := mariadb.StartSet(ctx, t.TempDir(), 2, true)
	t.Cleanup(set.Stop)
	if err != nil {
		t.Fatal(err)
	}
	for _, seed := range replicaSeeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0x5ec))
			s := drawReplicaSale(t, rng, set, testenv.Name("replicas_"))
			// Stderr, not t.Log: shown even when a panic ends the binary.
			fmt.Fprintf(os.Stderr, "TestReplicaSettings_AcceptedAreSafe seed=%d (rerun: SECKILL_TEST_SETTINGS_SEED=%d go test ./app -run TestReplicaSettings): %s\n", seed, seed, s)
			t.Cleanup(func() {
				if t.Failed() {
					t.Logf("seed %d: %s", seed, s)
				}
			})
			s.run(t, set)
		})
	}
}

// replicaSeeds is seeds of engine/settings_test.go, by the
// variables only.
func replicaSeeds(t *testing.T) []uint64 {
	t.Helper()
	if v := os.Getenv("SECKILL_TEST_SETTINGS_SEED"); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("SECKILL_TEST_SETTINGS_SEED=%q: %v", v, err)
		}
		return []uint64{n}
	}
	out := slices.Clone(replicaFixedSeeds)
	if v := os.Getenv("SECKILL_TEST_SETTINGS_RUNS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("SECKILL_TEST_SETTINGS_RUNS=%q: %v", v, err)
		}
		for range n {
			out = append(out, rand.Uint64()%1_000_000+1)
		}
	}
	return out
}

// replicaSale is one seed's draw: the settings and the scene.
type replicaSale struct {
	db       string            // the seed's database
	cfg      config.Config     // the drawn settings on the defaults
	drawn    map[string]string // the drawn settings, as the environment sets them
	refused  int               // draws the configuration refused before this one
	semiSync bool              // the primary's semi-sync replication
	stalled  int               // replicas whose IO stops
	stock    int64
}

func (s *replicaSale) String() string {
	var kv []string
	for k, v := range s.drawn {
		kv = append(kv, k+"="+v)
	}
	slices.Sort(kv)
	return fmt.Sprintf("%s; semi-sync %v, %d replicas stalled, stock %d; %d draws refused before", strings.Join(kv, " "), s.semiSync, s.stalled, s.stock, s.refused)
}

// drawReplicaSale draws replicaDrawn, as the environment would set them,
// until the configuration accepts the combination (a refusal must name
// its keys; each is counted), then the scene.
func drawReplicaSale(t *testing.T, rng *rand.Rand, set *mariadb.Set, db string) *replicaSale {
	t.Helper()
	var replicas []string
	for _, r := range set.Replicas {
		replicas = append(replicas, mariadb.AppDSN(r.Addr, ""))
	}
	settings := map[string]config.Setting{}
	for _, st := range config.Settings() {
		settings[st.Key] = st
	}
	s := &replicaSale{db: db}
	for ; s.refused < 100; s.refused++ {
		s.drawn = map[string]string{}
		for _, k := range replicaDrawn {
			st, ok := settings[k]
			if !ok {
				t.Fatalf("no setting %s", k)
			}
			s.drawn[st.Env] = drawReplicaSetting(t, rng, st, len(replicas))
		}
		env := map[string]string{"SECKILL_MYSQL_DSN": mariadb.AppDSN(set.Primary.Addr, db), "SECKILL_MYSQL_REPLICAS": strings.Join(replicas, ",")}
		for k, v := range s.drawn {
			env[k] = v
		}
		cfg, err := config.Load("", func(k string) string { return env[k] })
		if err == nil {
			s.cfg = cfg
			s.semiSync, s.stalled, s.stock = rng.IntN(2) == 0, 1+rng.IntN(len(replicas)), 20+rng.Int64N(41)
			return s
		}
		keys := append(slices.Clone(replicaDrawn), "http.write_timeout") // the write deadline bounds the request's
		if named := slices.DeleteFunc(keys, func(k string) bool { return !strings.Contains(err.Error(), k) }); len(named) < 2 {
			t.Errorf("config refused a draw of values each within its range with %q; want the keys of the combination named", err)
		}
	}
	t.Fatal("100 draws in a row refused by the configuration")
	return nil
}

// drawReplicaSetting draws a duration as drawValue of
// engine/settings_test.go does (its least one time in ten, its
// greatest one in ten, else log-uniform from a tenth of its default; no
// upper bound: ten times the default), in whole milliseconds, and an
// integer uniformly up to most.
func drawReplicaSetting(t *testing.T, rng *rand.Rand, s config.Setting, most int) string {
	t.Helper()
	lo, hi, ok := s.Bounds()
	if !ok {
		t.Fatalf("%s: no numeric bounds to draw from", s.Key)
	}
	if s.Type() != reflect.TypeOf(time.Duration(0)) {
		return strconv.Itoa(int(lo) + rng.IntN(int(min(hi, float64(most))-lo)+1))
	}
	d, err := time.ParseDuration(s.Default)
	if err != nil {
		t.Fatalf("%s: default %q: %v", s.Key, s.Default, err)
	}
	if math.IsInf(hi, 1) {
		hi = 10 * float64(d)
	}
	x := lo
	switch rng.IntN(10) {
	case 0:
	case 1:
		x = hi
	default:
		from := max(lo, float64(d)/10)
		x = math.Exp(math.Log(from) + rng.Float64()*(math.Log(hi)-math.Log(from)))
	}
	return time.Duration(x).Round(time.Millisecond).String()
}

// run sells with s's settings and checks the replicas while stalled, then
// the primary.
func (s *replicaSale) run(t *testing.T, set *mariadb.Set) {
	ctx := context.Background()
	if err := set.Primary.Exec(ctx, fmt.Sprintf("SET GLOBAL rpl_semi_sync_master_enabled = %v", s.semiSync), "CREATE DATABASE "+s.db); err != nil {
		t.Fatal(err)
	}
	migrate(t, mariadb.AppDSN(set.Primary.Addr, s.db))
	primary := testenv.DB(t, mariadb.AppDSN(set.Primary.Addr, s.db))
	sku := struct{ ID int64 }{}
	if err := primary.Exec("INSERT INTO skus (name, total_stock, stock, per_user_limit, created_at, updated_at) VALUES ('replicas', ?, ?, 1, NOW(6), NOW(6))", s.stock, s.stock).Error; err != nil {
		t.Fatal(err)
	}
	if err := primary.Raw("SELECT MAX(id) AS id FROM skus").Scan(&sku).Error; err != nil {
		t.Fatal(err)
	}
	caughtUp(t, set) // the replicas have the schema and the SKU before any stall
	stalled := set.Replicas[:s.stalled]
	t.Cleanup(func() { // a seed that failed midway leaves the next one replicas that follow
		for _, r := range stalled {
			if err := r.StartIO(ctx); err != nil {
				t.Error(err)
			}
		}
	})

	prefix := testenv.Name("replica-settings") + ":"
	var urls []string
	for range 2 {
		cfg := s.cfg
		cfg.HTTP.Addr = "127.0.0.1:0"
		cfg.MySQL.MaxOpenConns, cfg.MySQL.MaxIdleConns = 8, 8
		cfg.Redis.Addrs = []string{testenv.RedisAddr()}
		cfg.Admin.Token = token
		cfg.Auth.PaymentTokens = paymentToken
		noShopperAuth(&cfg)
		cfg.Lock.Prefix = prefix
		urls = append(urls, "http://"+serveConfig(t, cfg))
	}
	b := newBuyers(urls, sku.ID)
	var calls atomic.Int64
	counted := func(do func(*testing.T, string, int) int) func(*testing.T, string, int) int {
		return func(t *testing.T, u string, i int) int { calls.Add(1); return do(t, u, i) }
	}
	phase := func(name string, n int) []string {
		var users []string
		for i := range n {
			users = append(users, fmt.Sprintf("%s-%d", name, i))
		}
		return users
	}

	unknown := b.all(t, phase("before", 40), counted(b.order))
	placed := b.ackedOf("before")
	if long := time.Second; len(placed) == 0 && (s.cfg.MySQL.MinReplicas == 0 || s.cfg.MySQL.ReplicaTimeout >= long) && s.cfg.Order.RequestTimeout >= long {
		t.Errorf("none of 40 orders acknowledged with both replicas following; answers %v", b.statuses)
	}
	third := len(placed) / 3
	unpaid := b.all(t, placed[:third], counted(b.pay))
	payStalled, cancelStalled := placed[third:2*third], placed[2*third:]

	for _, r := range stalled {
		if err := r.StopIO(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var (
		wg                                         sync.WaitGroup
		stalledOrders, stalledPays, stalledCancels []string
		refused                                    atomic.Int64 // orders refused 409 during the stall
	)
	refusing := func(t *testing.T, u string, i int) int {
		status := b.order(t, u, i)
		if status == http.StatusConflict {
			refused.Add(1)
		}
		return status
	}
	wg.Go(func() { stalledOrders = b.all(t, phase("stalled", 16), counted(refusing)) })
	wg.Go(func() { stalledPays = b.all(t, payStalled, counted(b.pay)) })
	wg.Go(func() { stalledCancels = b.all(t, cancelStalled, counted(b.cancel)) })
	wg.Wait()
	s.checkReplicas(t, set, b, stall{pays: payStalled, cancels: cancelStalled, refused: refused.Load()})

	for _, r := range stalled {
		if err := r.StartIO(ctx); err != nil {
			t.Fatal(err)
		}
	}
	caughtUp(t, set)
	b.retry(t, slices.Concat(unknown, stalledOrders), counted(b.order))
	b.retry(t, slices.Concat(unpaid, stalledPays), counted(b.pay))
	b.retry(t, stalledCancels, counted(b.cancel))
	s.checkPrimary(t, b, primary, calls.Load())
}

// stall is what was asked during the stall: the payments and cancels
// (its orders are its buyers'), and how many orders were refused.
type stall struct {
	pays, cancels []string
	refused       int64
}

func (st stall) has(kind, user string) bool {
	switch kind {
	case kindOrders:
		return strings.HasPrefix(user, "stalled-")
	case kindPayments:
		return slices.Contains(st.pays, user)
	}
	return slices.Contains(st.cancels, user)
}

// checkReplicas reads each replica once its relay log is applied: every
// acknowledged write must be on at least min_replicas of them, and a
// refusal during the stall (sold out) on as many, counting the replicas
// that still follow; with 0, no write the stall acknowledged may be on a
// stalled one.
func (s *replicaSale) checkReplicas(t *testing.T, set *mariadb.Set, b *buyers, st stall) {
	t.Helper()
	lacking := map[string]int{} // "kind user" → the replicas that lack it
	soldOut := 0                // stalled replicas whose SKU is sold out
	for i, r := range set.Replicas {
		if err := r.WaitApplied(context.Background(), 30*time.Second); err != nil {
			t.Fatal(err)
		}
		db := testenv.DB(t, mariadb.AppDSN(r.Addr, s.db))
		lost, _ := b.lostOn(t, db)
		for kind, users := range lost {
			for _, u := range users {
				lacking[kind+" "+u]++
			}
		}
		var stock int64
		if err := db.Raw("SELECT stock FROM skus WHERE id = ?", b.sku).Scan(&stock).Error; err != nil {
			t.Fatal(err)
		}
		if i < s.stalled && stock == 0 {
			soldOut++
		}
	}
	min, short, during := s.cfg.MySQL.MinReplicas, 0, 0
	for kind, users := range map[string][]string{kindOrders: keys(b.acked), kindPayments: keys(b.paid), kindCancels: keys(b.cancelled)} {
		for _, u := range users {
			w := kind + " " + u
			if n := len(set.Replicas) - lacking[w]; n < min {
				short++
				t.Errorf("%s acknowledged; on %d replicas while stalled, want %d or more", w, n, min)
			}
			if !st.has(kind, u) {
				continue
			}
			during++
			if min == 0 && lacking[w] < s.stalled {
				t.Errorf("%s acknowledged during the stall with min_replicas 0 is on a stalled replica: the stall or the comparison does not work", w)
			}
		}
	}
	if following := len(set.Replicas) - s.stalled; st.refused > 0 && soldOut+following < min {
		t.Errorf("%d orders refused 409 during the stall; %d stalled replicas have the SKU sold out, %d follow: want %d or more", st.refused, soldOut, following, min)
	}
	t.Logf("while stalled: %d orders, %d payments, %d cancels acknowledged (%d during the stall, %d refused); %d on fewer than %d replicas",
		len(b.acked), len(b.paid), len(b.cancelled), during, st.refused, short, min)
}

// checkPrimary checks the primary after the retries: its books balance,
// it holds every acknowledged write, one order per buyer and none that
// was not acknowledged; every request was answered, from the contract.
func (s *replicaSale) checkPrimary(t *testing.T, b *buyers, primary *gorm.DB, calls int64) {
	t.Helper()
	testenv.CheckInvariants(t, primary, b.sku)
	if lost, _ := b.lostOn(t, primary); len(lost) != 0 {
		t.Errorf("acknowledged writes not on the primary: %v", lost)
	}
	var orders []struct {
		UserID string
		N      int
	}
	if err := primary.Raw("SELECT user_id, COUNT(*) AS n FROM orders WHERE sku_id = ? GROUP BY user_id", b.sku).Scan(&orders).Error; err != nil {
		t.Fatal(err)
	}
	for _, o := range orders {
		if o.N != 1 || !b.acked[o.UserID] {
			t.Errorf("buyer %s has %d orders, acknowledged %v; want one, acknowledged", o.UserID, o.N, b.acked[o.UserID])
		}
	}
	ids := map[string]string{}
	for u := range b.acked {
		if other, dup := ids[b.ids[u]]; dup {
			t.Errorf("buyers %s and %s told one order id %s", other, u, b.ids[u])
		}
		ids[b.ids[u]] = u
	}
	var answered int64
	for k, n := range b.statuses {
		answered += int64(n)
		var kind string
		var status int
		fmt.Sscanf(k, "%s %d", &kind, &status)
		if !slices.Contains([]int{http.StatusOK, http.StatusCreated, http.StatusConflict, http.StatusTooManyRequests, http.StatusServiceUnavailable}, status) {
			t.Errorf("%d answers %q; want only answers of the contract", n, k)
		}
	}
	if answered != calls {
		t.Errorf("%d requests, %d answered: %d got no answer (connection closed or timed out)", calls, answered, calls-answered)
	}
	t.Logf("answers %v", b.statuses)
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// caughtUp waits, at most 30s, until every replica has applied what the
// primary has written.
func caughtUp(t *testing.T, set *mariadb.Set) {
	t.Helper()
	ctx := context.Background()
	var pos string
	if err := set.Primary.Query(ctx, "SELECT @@gtid_binlog_pos", &pos); err != nil {
		t.Fatal(err)
	}
	for _, r := range set.Replicas {
		var waited int
		if err := r.Query(ctx, fmt.Sprintf("SELECT MASTER_GTID_WAIT('%s', 30)", pos), &waited); err != nil || waited != 0 {
			t.Fatalf("replica %d: MASTER_GTID_WAIT(%s) = %d, %v; want 0", r.ID, pos, waited, err)
		}
	}
}
