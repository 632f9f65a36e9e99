package simpve

// provisionEndpoints are the methods of clones, disk moves, configuration updates and resizes.
func (s *Server) provisionEndpoints() map[string]endpoint { return nil }
