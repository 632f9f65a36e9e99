package proxmox

import (
	"math"
	"strings"
)

// vmcLXC fills cfg from a container's configuration.
func vmcLXC(cfg *VMConfig, raw map[string]string) error {
	cfg.Name = raw["hostname"]
	cfg.OSType = raw["ostype"]
	cores, err := vmcScalarInt(raw, "cores", 0, 1, 8192)
	if err != nil {
		return err
	}
	cfg.CPU = CPU{Sockets: 1, Cores: int(cores), VCPUs: int(cores)}
	if cfg.MemoryMB, err = vmcScalarInt(raw, "memory", 512, 1, math.MaxInt32); err != nil {
		return err
	}
	if cfg.Disks, err = vmcLXCDisks(raw); err != nil {
		return err
	}
	if cfg.NICs, err = vmcLXCNICs(raw); err != nil {
		return err
	}
	if cfg.Unused, err = vmcUnused(raw); err != nil {
		return err
	}
	return nil
}

// vmcLXCDisks parses rootfs and mpN ([volume=]VOLUME,mp=PATH,size=…). Bind mounts (an
// absolute path outside /dev) are not disks and are skipped.
func vmcLXCDisks(raw map[string]string) ([]Disk, error) {
	keys := []vmcDevKey{}
	if _, ok := raw["rootfs"]; ok {
		keys = append(keys, vmcDevKey{key: "rootfs"})
	}
	keys = append(keys, vmcDevices(raw, map[string]int{"mp": 0})...)
	disks := []Disk{}
	for _, d := range keys {
		opts, err := vmcProps(d.key, raw[d.key], "volume", nil)
		if err != nil {
			return nil, err
		}
		vol := opts["volume"]
		if vol == "" {
			return nil, &ConfigError{Key: d.key, Reason: "no volume"}
		}
		disk := Disk{Device: d.key, MountPoint: opts["mp"], Bootable: d.key == "rootfs"}
		if d.key == "rootfs" {
			disk.MountPoint = "/"
		} else if disk.MountPoint == "" {
			return nil, &ConfigError{Key: d.key, Reason: "no mount point (mp)"}
		}
		if strings.HasPrefix(vol, "/") && !strings.HasPrefix(vol, "/dev/") {
			continue // bind mount of a host directory
		}
		if disk.Storage, disk.Volume, err = vmcVolume(d.key, vol); err != nil {
			return nil, err
		}
		if v, ok := opts["size"]; ok {
			if disk.SizeBytes, err = vmcSize(d.key, v); err != nil {
				return nil, err
			}
		}
		disk.Format = vmcFormat(opts["format"], disk.Volume)
		disks = append(disks, disk)
	}
	return disks, nil
}

// vmcLXCNICs parses a container's netN: name=eth0,bridge=…,hwaddr=…,tag=…,firewall=1,type=veth.
func vmcLXCNICs(raw map[string]string) ([]NIC, error) {
	out := []NIC{}
	for _, d := range vmcDevices(raw, map[string]int{"net": 0}) {
		opts, err := vmcProps(d.key, raw[d.key], "", nil)
		if err != nil {
			return nil, err
		}
		nic := NIC{Device: d.key, Name: opts["name"], Bridge: opts["bridge"], Model: opts["type"]}
		if nic.Name == "" {
			return nil, &ConfigError{Key: d.key, Reason: "no interface name"}
		}
		if nic.Model == "" {
			nic.Model = "veth"
		}
		if v, ok := opts["hwaddr"]; ok {
			if nic.MAC, err = vmcMAC(d.key, "hwaddr", v); err != nil {
				return nil, err
			}
		}
		if nic.VLAN, err = vmcVLAN(d.key, opts); err != nil {
			return nil, err
		}
		if nic.Firewall, err = vmcOptBool(d.key, opts, "firewall"); err != nil {
			return nil, err
		}
		out = append(out, nic)
	}
	return out, nil
}
