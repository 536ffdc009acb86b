import CurfewCore
import CurfewSync

/// Called by Tests/CurfewTestZones' constructor when the test bundle loads.
@_cdecl("curfew_install_system_zones")
public func installSystemZones() {
    if ZoneDatabase.source == nil { SystemZones.install() }
}
