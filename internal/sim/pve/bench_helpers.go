package simpve

// RemoveStorage deletes storage id directly (no request logged, no validation) and reports
// whether it existed. Benchmarks use it to keep the storage list, which GET /storage returns
// whole, at its initial size while they create thousands of storages.
func (s *Server) RemoveStorage(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.state.storages[id]
	delete(s.state.storages, id)
	return ok
}
