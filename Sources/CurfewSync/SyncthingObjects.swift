import CurfewCore

/// The objects of Syncthing's REST configuration API (`/rest/config/...`) that Curfew sends, with
/// Syncthing's own field names.
public enum SyncthingObjects {
    /// The fields Curfew needs on its folder: where it is, send-receive, the watcher on with a short
    /// delay, permissions kept (a `PATCH` of an existing folder sends only these).
    public struct FolderSettings: Encodable, Sendable {
        public var path: String
        public var type = "sendreceive"
        public var fsWatcherEnabled = true
        public var fsWatcherDelayS: Int
        public var ignorePerms = false

        public init(path: String, fsWatcherDelayS: Int) {
            self.path = path
            self.fsWatcherDelayS = fsWatcherDelayS
        }
    }

    /// A device a folder is shared with.
    public struct FolderDevice: Encodable, Sendable {
        public var deviceID: String

        public init(deviceID: String) { self.deviceID = deviceID }
    }

    /// A new folder: its id and label, the settings, an hourly full rescan behind the watcher, and
    /// the devices it is shared with.
    public struct Folder: Encodable, Sendable {
        public var id: String
        public var label: String
        public var settings: FolderSettings
        public var rescanIntervalS = 3600
        public var devices: [FolderDevice]

        public init(id: String, label: String, settings: FolderSettings, devices: [FolderDevice]) {
            self.id = id
            self.label = label
            self.settings = settings
            self.devices = devices
        }

        enum CodingKeys: String, CodingKey { case id, label, rescanIntervalS, devices }

        /// The settings' fields beside the folder's own, as Syncthing reads one flat object.
        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(label, forKey: .label)
            try settings.encode(to: encoder)
            try container.encode(rescanIntervalS, forKey: .rescanIntervalS)
            try container.encode(devices, forKey: .devices)
        }
    }

    /// The devices a folder is shared with, alone (a `PATCH`).
    public struct FolderDevices: Encodable, Sendable {
        public var devices: [FolderDevice]

        public init(devices: [FolderDevice]) { self.devices = devices }
    }

    /// Another Syncthing instance this one connects to.
    public struct Device: Encodable, Sendable {
        public var deviceID: String
        public var name: String
        public var addresses: [String]

        public init(deviceID: String, name: String, addresses: [String]) {
            self.deviceID = deviceID
            self.name = name
            self.addresses = addresses
        }
    }
}

extension SyncthingAPI {
    /// `call` with `body` encoded as JSON.
    @discardableResult
    public func call(_ method: String, _ path: String, sending body: some Encodable) throws(Failure) -> JSONValue? {
        try call(method, path, body: JSONValueEncoder().value(of: body))
    }
}
