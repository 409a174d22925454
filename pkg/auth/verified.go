package auth

import (
	"sync"
	"time"
)

// Verified remembers the claims of tokens whose signature checked out, so
// a client that sends the same credential with every move pays for the
// HMAC and the decoding once. The claims follow from the token and the
// keyring alone, which is fixed for the process; expiry is still checked
// on every use.
type Verified struct {
	ring  *Keyring
	limit int

	mu sync.Mutex
	m  map[string]Claims
}

// NewVerified verifies with ring and remembers up to limit tokens.
func NewVerified(ring *Keyring, limit int) *Verified {
	return &Verified{ring: ring, limit: max(1, limit), m: make(map[string]Claims)}
}

// Verify is Keyring.Verify, answered from memory for a token seen before.
func (v *Verified) Verify(token string, now time.Time) (Claims, error) {
	v.mu.Lock()
	c, ok := v.m[token]
	v.mu.Unlock()
	if ok {
		if now.Unix() >= c.ExpiresAt {
			return Claims{}, ErrExpired
		}
		return c, nil
	}
	c, err := v.ring.Verify(token, now)
	if err != nil {
		return c, err
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.m) >= v.limit {
		// Forget an arbitrary token: a miss only costs one verification.
		for k := range v.m {
			delete(v.m, k)
			break
		}
	}
	v.m[token] = c
	return c, nil
}
