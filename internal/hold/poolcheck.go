package hold

import "fmt"

// CheckPools is the doctor's look at what the ticket needs: the lock
// directory trusted, the pools file read, and each device of each pool
// (or the one device) free or held by whom.
func CheckPools(lockDir, poolsFile, device string) []Check {
	var cs []Check
	add := func(level, format string, args ...any) {
		cs = append(cs, Check{level, fmt.Sprintf(format, args...)})
	}
	if dir, err := openLockDir(lockDir, false); err == nil {
		dir.close()
	} else if !isNotExist(err) {
		add("FAIL", "%v", err)
		return cs
	}
	pools, err := LoadPools(poolsFile)
	if err != nil {
		add("FAIL", "%v", err)
		return cs
	}
	names := pools.Names()
	if len(names) == 0 {
		names = []string{device}
		add("ok", "no pools declared in %s: %s is one device", poolsFile, device)
	}
	for _, name := range names {
		d := &Device{Dir: lockDir, Name: name, Pool: pools.Pool(name)}
		st, err := d.Status()
		if err != nil {
			add("FAIL", "%s: %v", name, err)
			continue
		}
		if d.Pool == nil {
			add("ok", "%s: %s", name, holderText(st.Holder, st.Held))
			continue
		}
		env := "no vendor variable"
		if d.Pool.Env != "" {
			env = d.Pool.Env
		}
		add("ok", "pool %s (%s): %d devices, %s, %d waiting", name, d.Pool.Where, len(d.Pool.Members), env, len(st.Queue))
		for _, m := range st.Devices {
			add("ok", "pool %s: %s (index %s) %s", name, m.Name, m.Index, holderText(m.Holder, m.Holder != nil))
		}
	}
	return cs
}

func holderText(f *Facts, held bool) string {
	switch {
	case f != nil:
		return "held by " + f.String()
	case held:
		return "held, by a process whose ticket holder is gone"
	}
	return "free"
}
