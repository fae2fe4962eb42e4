// Package orderid turns the database's sequential order ids into the
// opaque ids clients see, and back: the id beside eight zero bytes, one
// AES block under a configured key, as 22 base64url characters.
//
// Without the key, ids reveal neither the sequence nor the order count,
// and decoding needs no database column. The zero half authenticates: a
// made-up id is refused without a database read.
package orderid

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// Len is the length of an encoded id.
const Len = 22

// Codec encodes and decodes order ids. It is safe for concurrent use.
type Codec struct {
	block cipher.Block
}

// New returns a Codec for an AES key of 16, 24 or 32 bytes.
func New(key []byte) (*Codec, error) {
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("orderid: %w", err)
	}
	return &Codec{block: b}, nil
}

// ParseKey decodes a key written as 32, 48 or 64 hexadecimal digits.
func ParseKey(s string) ([]byte, error) {
	k, err := hex.DecodeString(s)
	if err != nil || (len(k) != 16 && len(k) != 24 && len(k) != 32) {
		return nil, errors.New("orderid: the key must be 32, 48 or 64 hexadecimal digits (16, 24 or 32 bytes)")
	}
	return k, nil
}

// RandomKey returns a new 16-byte key as hex: for the quick start, whose
// ids need not outlive the process.
func RandomKey() string {
	var k [16]byte
	_, _ = rand.Read(k[:]) // crypto/rand.Read never fails
	return hex.EncodeToString(k[:])
}

// Encode returns the opaque id of internal id.
func (c *Codec) Encode(id int64) string {
	var b [Len]byte
	return string(c.Append(b[:0], id))
}

// Append appends the opaque id of internal id to dst.
func (c *Codec) Append(dst []byte, id int64) []byte {
	var block [aes.BlockSize]byte
	binary.BigEndian.PutUint64(block[:8], uint64(id))
	c.block.Encrypt(block[:], block[:])
	return base64.RawURLEncoding.AppendEncode(dst, block[:])
}

// Decode returns the internal id of an opaque id; false for anything
// Encode did not write under this key.
func (c *Codec) Decode(s string) (int64, bool) {
	if len(s) != Len {
		return 0, false
	}
	var block [aes.BlockSize]byte
	if n, err := base64.RawURLEncoding.Decode(block[:], []byte(s)); err != nil || n != aes.BlockSize {
		return 0, false
	}
	c.block.Decrypt(block[:], block[:])
	if binary.BigEndian.Uint64(block[8:]) != 0 {
		return 0, false
	}
	id := int64(binary.BigEndian.Uint64(block[:8]))
	if id < 1 {
		return 0, false
	}
	return id, true
}
