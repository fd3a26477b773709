package testenv

import (
	"strings"
	"sync"
)

// Buffer is a bytes sink that a running command (or a goroutine) writes while the test
// reads it: a strings.Builder behind a mutex.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *Buffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *Buffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
