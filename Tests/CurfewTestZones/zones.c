#include "CurfewTestZones.h"

// Swift Testing has no hook that runs before every suite; a constructor does (defined in Swift:
// Tests/CurfewTestSupport/Zones.swift).
__attribute__((constructor)) static void install_zones(void) { curfew_install_system_zones(); }
