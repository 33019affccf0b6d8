//go:build !windows

package energy

import "errors"

// SystemEMI lists the platform's energy meters: the Energy Meter
// Interface is Windows's; Linux's meters are hwmon and RAPL.
func SystemEMI() ([]EMIDevice, error) {
	return nil, errors.New("the Energy Meter Interface (emi.h) is Windows's, not this OS's: read hwmon or rapl")
}
