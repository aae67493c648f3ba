package counters

// RunGC runs the table's GC now, as the GC loop does just after a boundary.
func (s *Server) RunGC() int { return s.table.GC() }
