package guestconfig

import (
	"math"
	"strings"
)

// lxc fills cfg from a container's configuration.
func lxc(cfg *Config, raw map[string]string) error {
	cfg.Name = raw["hostname"]
	cfg.OSType = raw["ostype"]
	cores, err := scalarInt(raw, "cores", 0, 1, 8192)
	if err != nil {
		return err
	}
	cfg.CPU = CPU{Sockets: 1, Cores: int(cores), VCPUs: int(cores)}
	if cfg.MemoryMB, err = scalarInt(raw, "memory", 512, 1, math.MaxInt32); err != nil {
		return err
	}
	if cfg.Disks, err = lxcDisks(raw); err != nil {
		return err
	}
	if cfg.NICs, err = lxcNICs(raw); err != nil {
		return err
	}
	if cfg.Unused, err = unused(raw); err != nil {
		return err
	}
	return nil
}

// lxcDisks parses rootfs and mpN ([volume=]VOLUME,mp=PATH,size=…). Bind mounts (an
// absolute path outside /dev) are not disks and are skipped.
func lxcDisks(raw map[string]string) ([]Disk, error) {
	keys := []devKey{}
	if _, ok := raw["rootfs"]; ok {
		keys = append(keys, devKey{key: "rootfs"})
	}
	keys = append(keys, devices(raw, map[string]int{"mp": 0})...)
	disks := []Disk{}
	for _, d := range keys {
		opts, err := props(d.key, raw[d.key], "volume", nil)
		if err != nil {
			return nil, err
		}
		vol := opts["volume"]
		if vol == "" {
			return nil, &Error{Key: d.key, Reason: "no volume"}
		}
		disk := Disk{Device: d.key, MountPoint: opts["mp"], Bootable: d.key == "rootfs"}
		if d.key == "rootfs" {
			disk.MountPoint = "/"
		} else if disk.MountPoint == "" {
			return nil, &Error{Key: d.key, Reason: "no mount point (mp)"}
		}
		if strings.HasPrefix(vol, "/") && !strings.HasPrefix(vol, "/dev/") {
			continue // bind mount of a host directory
		}
		if disk.Storage, disk.Volume, err = splitVolume(d.key, vol); err != nil {
			return nil, err
		}
		if v, ok := opts["size"]; ok {
			if disk.SizeBytes, err = parseSize(d.key, v); err != nil {
				return nil, err
			}
		}
		disk.Format = format(opts["format"], disk.Volume)
		disks = append(disks, disk)
	}
	return disks, nil
}

// lxcNICs parses a container's netN: name=eth0,bridge=…,hwaddr=…,tag=…,firewall=1,type=veth.
func lxcNICs(raw map[string]string) ([]NIC, error) {
	out := []NIC{}
	for _, d := range devices(raw, map[string]int{"net": 0}) {
		opts, err := props(d.key, raw[d.key], "", nil)
		if err != nil {
			return nil, err
		}
		nic := NIC{Device: d.key, Name: opts["name"], Bridge: opts["bridge"], Model: opts["type"]}
		if nic.Name == "" {
			return nil, &Error{Key: d.key, Reason: "no interface name"}
		}
		if nic.Model == "" {
			nic.Model = "veth"
		}
		if v, ok := opts["hwaddr"]; ok {
			if nic.MAC, err = mac(d.key, "hwaddr", v); err != nil {
				return nil, err
			}
		}
		if nic.VLAN, err = vlan(d.key, opts); err != nil {
			return nil, err
		}
		if nic.Firewall, err = optBool(d.key, opts, "firewall"); err != nil {
			return nil, err
		}
		out = append(out, nic)
	}
	return out, nil
}
