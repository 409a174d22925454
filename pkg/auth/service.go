package auth

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"
)

// KindService is a Palace service or an operator's tool calling an
// internal RPC (creating games, expiring deadlines). Players never hold
// one: the services sign them with keys of their own (--service-keys)
// that no client-facing credential shares.
const KindService Kind = "service"

// ServiceHeader carries the service credential. It is not
// "authorization" because an internal caller may act for a seat too (an
// AI worker's move carries the seat's credential there).
const ServiceHeader = "x-palace-service"

// ErrNotService is returned for a valid credential of another kind.
var ErrNotService = errors.New("credential is not a service credential")

// ServiceToken signs a service credential for caller, valid for ttl.
func ServiceToken(ring *Keyring, caller string, now time.Time, ttl time.Duration) (string, error) {
	return ring.Sign(Claims{Kind: KindService, Subject: caller, IssuedAt: now.Unix(), ExpiresAt: now.Add(ttl).Unix()})
}

// VerifyService checks that token is a service credential, valid now.
func VerifyService(v *Verified, token string, now time.Time) (Claims, error) {
	c, err := v.Verify(token, now)
	if err != nil {
		return c, err
	}
	if c.Kind != KindService {
		return Claims{}, ErrNotService
	}
	return c, nil
}

// ServiceCredentials puts a service credential on every call of a gRPC
// connection (grpc.WithPerRPCCredentials). It signs one and signs again
// when a quarter of its life is left, so a call never carries one that
// expires on the way.
type ServiceCredentials struct {
	ring   *Keyring
	caller string
	ttl    time.Duration
	now    func() time.Time

	mu  sync.Mutex
	tok string
	exp time.Time
}

// NewServiceCredentials signs as caller with ring; tokens live ttl.
func NewServiceCredentials(ring *Keyring, caller string, ttl time.Duration) *ServiceCredentials {
	return &ServiceCredentials{ring: ring, caller: caller, ttl: ttl, now: time.Now}
}

// ServiceCredentialsFromKeys is NewServiceCredentials with the keyring
// of a --service-keys value, for tools and tests outside a Palace process.
func ServiceCredentialsFromKeys(keys, caller string, ttl time.Duration) (*ServiceCredentials, error) {
	ring, err := ParseKeyring(keys)
	if err != nil {
		return nil, err
	}
	return NewServiceCredentials(ring, caller, ttl), nil
}

// Token returns the current credential, signing a new one when due.
func (s *ServiceCredentials) Token() (string, error) {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tok == "" || s.exp.Sub(now) < s.ttl/4 {
		tok, err := ServiceToken(s.ring, s.caller, now, s.ttl)
		if err != nil {
			return "", fmt.Errorf("sign service credential: %w", err)
		}
		s.tok, s.exp = tok, now.Add(s.ttl)
	}
	return s.tok, nil
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (s *ServiceCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	tok, err := s.Token()
	if err != nil {
		return nil, err
	}
	return map[string]string{ServiceHeader: tok}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials:
// services talk over the cluster's network, plaintext unless a mesh
// wraps it, like every other call between them.
func (s *ServiceCredentials) RequireTransportSecurity() bool { return false }
