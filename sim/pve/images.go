package simpve

// imageEndpoints are the methods of storage content, download-url and VM creation with import-from.
func (s *Server) imageEndpoints() map[string]endpoint { return nil }
