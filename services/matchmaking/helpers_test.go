package matchmaking_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/palacehq/palace/pkg/app"
	"github.com/palacehq/palace/pkg/apptest"
	commonv1 "github.com/palacehq/palace/pkg/gen/palace/common/v1"
	gamev1 "github.com/palacehq/palace/pkg/gen/palace/game/v1"
	matchmakingv1 "github.com/palacehq/palace/pkg/gen/palace/matchmaking/v1"
	"github.com/palacehq/palace/pkg/redistest"
	"github.com/palacehq/palace/services/game"
	"github.com/palacehq/palace/services/game/gametest"
	"github.com/palacehq/palace/services/matchmaking"
)

const clientID = "palace-test.apps.googleusercontent.com"

// fakeClock is real time plus an offset tests can move forward.
type fakeClock struct{ off atomic.Int64 }

func (c *fakeClock) Now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *fakeClock) Advance(d time.Duration) { c.off.Add(int64(d)) }

// issuer is a local stand-in for Google: a JWKS endpoint serving the
// public half of an RSA key generated here, and a signer for ID tokens.
type issuer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	keys  map[string]*rsa.PrivateKey
	fetch atomic.Int64
}

func newIssuer(t testing.TB) *issuer {
	t.Helper()
	is := &issuer{keys: map[string]*rsa.PrivateKey{}}
	is.addKey(t, "k1")
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		is.fetch.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		var set struct {
			Keys []map[string]string `json:"keys"`
		}
		for kid, k := range is.keys {
			set.Keys = append(set.Keys, map[string]string{
				"kty": "RSA", "kid": kid, "alg": "RS256", "use": "sig",
				"n": b64(k.N.Bytes()), "e": b64(big.NewInt(int64(k.E)).Bytes()),
			})
		}
		w.Header().Set("Cache-Control", "public, max-age=3600")
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) addKey(t testing.TB, kid string) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	is.keys[kid] = k
	is.mu.Unlock()
	return k
}

func b64(b []byte) string { return base64.RawURLEncoding.EncodeToString(b) }

// sign makes a JWT with header alg RS256 and kid, signed by key.
func signJWT(t testing.TB, key *rsa.PrivateKey, header, claims map[string]any) string {
	t.Helper()
	hb, _ := json.Marshal(header)
	cb, _ := json.Marshal(claims)
	head := b64(hb) + "." + b64(cb)
	sum := sha256.Sum256([]byte(head))
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		t.Fatal(err)
	}
	return head + "." + b64(sig)
}

// token is a valid Google-like ID token for sub.
func (is *issuer) token(t testing.TB, sub, name string, edit func(map[string]any)) string {
	t.Helper()
	now := time.Now()
	claims := map[string]any{
		"iss": "https://accounts.google.com", "aud": clientID, "sub": sub, "name": name,
		"email": sub + "@example.com", "email_verified": true,
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
	if edit != nil {
		edit(claims)
	}
	is.mu.Lock()
	key := is.keys["k1"]
	is.mu.Unlock()
	return signJWT(t, key, map[string]any{"alg": "RS256", "kid": "k1", "typ": "JWT"}, claims)
}

// env is a real game service and matchmaking replicas sharing a Redis
// and a key prefix.
type env struct {
	t      testing.TB
	redis  string
	game   *gametest.Env
	cfg    matchmaking.Config
	clock  *fakeClock
	issuer *issuer
	addrs  []string
	mm     []matchmakingv1.MatchmakingServiceClient
	// logs holds the replicas' warnings and errors.
	logs *apptest.LogBuffer
}

// newEnv starts the game service and replicas matchmaking replicas.
func newEnv(t testing.TB, replicas int, edit func(*matchmaking.Config)) *env {
	t.Helper()
	return newEnvOn(t, redistest.Addr(t), nil, replicas, edit)
}

// newEnvOn is newEnv on the Redis at redisAddr, with the game service's
// configuration edited by editGame.
func newEnvOn(t testing.TB, redisAddr string, editGame func(*game.Config), replicas int, edit func(*matchmaking.Config)) *env {
	t.Helper()
	e := &env{t: t, redis: redisAddr, game: gametest.StartOn(t, redisAddr, editGame), clock: &fakeClock{}, issuer: newIssuer(t), logs: &apptest.LogBuffer{}}
	secret := make([]byte, 32)
	_, _ = rand.Read(secret)
	e.cfg = matchmaking.DefaultConfig()
	e.cfg.KeyPrefix = redistest.Prefix(t)
	e.cfg.SigningKeys = "k:" + hex.EncodeToString(secret)
	e.cfg.GameAddr = e.game.Addr
	e.cfg.GoogleClientIDs = clientID
	e.cfg.GoogleJWKSURL = e.issuer.srv.URL
	e.cfg.Now = e.clock.Now
	e.cfg.PairingInterval = 20 * time.Millisecond
	if edit != nil {
		edit(&e.cfg)
	}
	for range replicas {
		e.startReplica()
	}
	return e
}

// startReplica starts one more matchmaking replica; stop ends it.
func (e *env) startReplica() (stop func()) {
	e.t.Helper()
	addr, stop := runReplicaLogging(e.t, e.redis, e.cfg, e.logs)
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { cc.Close() })
	e.addrs = append(e.addrs, addr)
	e.mm = append(e.mm, matchmakingv1.NewMatchmakingServiceClient(cc))
	return stop
}

func runReplica(t testing.TB, redisAddr string, cfg matchmaking.Config) (string, func()) {
	t.Helper()
	return runReplicaLogging(t, redisAddr, cfg, io.Discard)
}

// runReplicaLogging is runReplica writing its warnings and errors to logs.
func runReplicaLogging(t testing.TB, redisAddr string, cfg matchmaking.Config, logs io.Writer) (string, func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- app.Run(ctx, app.Options{
			Name: "matchmaking-test",
			Config: app.Config{
				Listen: "127.0.0.1:0", RedisAddr: redisAddr, LogFormat: "text", LogLevel: "warn",
				ShutdownTimeout: 5 * time.Second, MaxRecvBytes: 1 << 20,
				ServiceKeys: apptest.ServiceKeys,
			},
			Services:  []app.Binder{matchmaking.Bind(cfg)},
			LogOutput: logs,
			OnServing: func(a string) { addrc <- a },
		})
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-done:
		cancel()
		t.Fatalf("matchmaking did not start: %v", err)
	case <-time.After(20 * time.Second):
		cancel()
		t.Fatal("matchmaking did not start within 20s")
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("matchmaking stopped with %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return addr, stop
}

// as returns ctx carrying a credential.
func as(token string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+token)
}

type player struct {
	id, name, token string
}

func (p player) ctx() context.Context { return as(p.token) }

func (e *env) guest(name string) player {
	e.t.Helper()
	r, err := e.mm[0].CreateGuest(context.Background(), &matchmakingv1.CreateGuestRequest{Nickname: name})
	if err != nil {
		e.t.Fatalf("CreateGuest: %v", err)
	}
	return player{id: r.GetPlayerId(), name: name, token: r.GetToken()}
}

func (e *env) account(sub, name string) player {
	e.t.Helper()
	r, err := e.mm[0].SignInWithGoogle(context.Background(), &matchmakingv1.SignInWithGoogleRequest{IdToken: e.issuer.token(e.t, sub, name, nil)})
	if err != nil {
		e.t.Fatalf("SignInWithGoogle: %v", err)
	}
	return player{id: r.GetPlayerId(), name: r.GetDisplayName(), token: r.GetToken()}
}

var reqSeq atomic.Int64

func rid() string { return fmt.Sprintf("r%d-%d", time.Now().UnixNano(), reqSeq.Add(1)) }

var (
	janggi  = commonv1.GameKind_GAME_KIND_JANGGI
	xiangqi = commonv1.GameKind_GAME_KIND_XIANGQI
)

func (e *env) enter(mm matchmakingv1.MatchmakingServiceClient, p player, req *matchmakingv1.EnterQueueRequest) *matchmakingv1.Ticket {
	e.t.Helper()
	if req.RequestId == "" {
		req.RequestId = rid()
	}
	if req.Kind == 0 {
		req.Kind = janggi
	}
	r, err := mm.EnterQueue(p.ctx(), req)
	if err != nil {
		e.t.Fatalf("EnterQueue(%s): %v", p.name, err)
	}
	return r.GetTicket()
}

// waitTicket watches a ticket until it is settled and returns its last
// state.
func waitTicket(t testing.TB, mm matchmakingv1.MatchmakingServiceClient, p player, id string, within time.Duration) *matchmakingv1.Ticket {
	t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx(), within)
	defer cancel()
	st, err := mm.WatchTicket(ctx, &matchmakingv1.WatchTicketRequest{TicketId: id})
	if err != nil {
		t.Fatalf("WatchTicket: %v", err)
	}
	var last *matchmakingv1.Ticket
	for {
		r, err := st.Recv()
		if err == io.EOF {
			return last
		}
		if err != nil {
			t.Fatalf("WatchTicket %s of %s: %v (last %v)", id, p.name, err, last)
		}
		last = r.GetTicket()
	}
}

func wantCode(t testing.TB, err error, want codes.Code) {
	t.Helper()
	if status.Code(err) != want {
		t.Fatalf("got %v, want code %v", err, want)
	}
}

// gameAs reads a game with a seat credential.
func (e *env) gameAs(t testing.TB, seat *matchmakingv1.Seat) *gamev1.Game {
	t.Helper()
	r, err := e.game.Client.GetGame(as(seat.GetToken()), &gamev1.GetGameRequest{GameId: seat.GetGameId()})
	if err != nil {
		t.Fatalf("GetGame %s: %v", seat.GetGameId(), err)
	}
	return r.GetGame()
}

func (e *env) resign(t testing.TB, seat *matchmakingv1.Seat) {
	t.Helper()
	if _, err := e.game.Client.Resign(as(seat.GetToken()), &gamev1.ResignRequest{GameId: seat.GetGameId(), RequestId: rid()}); err != nil {
		t.Fatalf("Resign: %v", err)
	}
}

// eventually polls cond until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func codeOf(err error) codes.Code { return status.Code(err) }

// keysUnder lists every key under prefix.
func keysUnder(t *testing.T, prefix string) []string {
	t.Helper()
	var keys []string
	iter := redistest.Client(t).Scan(context.Background(), 0, prefix+"*", 1000).Iterator()
	for iter.Next(context.Background()) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}
