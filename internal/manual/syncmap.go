package manual

import "sync"

// syncMap is a set of buffer addresses.
type syncMap struct {
	mu sync.Mutex
	m  map[uintptr]struct{}
}

func (s *syncMap) add(p uintptr) {
	s.mu.Lock()
	if s.m == nil {
		s.m = make(map[uintptr]struct{})
	}
	s.m[p] = struct{}{}
	s.mu.Unlock()
}

func (s *syncMap) remove(p uintptr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[p]; !ok {
		return false
	}
	delete(s.m, p)
	return true
}

func (s *syncMap) contains(p uintptr) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.m[p]
	return ok
}
