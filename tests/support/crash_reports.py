"""The committed crash reports (.ips and .crash) and the UUIDs of the images they name."""

from support.fixtures import TESTS

CRASH_REPORTS = TESTS / "fixtures" / "crashreports"


KERNEL_UUID = "0D3A5C1E-7F29-3B48-9E61-2C5D8A4F7B03"


DYLD_UUID = "5E8F2A97-1C34-3D6B-A0F5-7B9C3E2D1A48"


LIBDYLD_UUID = "6F2A3B81-94DE-3C57-8E0B-52A1F7D4C609"


FOUNDATION_UUID = "9B7E4D21-6A8C-3F15-B2D9-4E1F7C0A3B56"


# Apple's own images in the reports: no server of the tests has their symbols.
APPLE_UUIDS = (KERNEL_UUID, DYLD_UUID, FOUNDATION_UUID, LIBDYLD_UUID)

METRICKIT_APP_UUID = "4C4C449A-5555-3144-A19A-E6E643E6625E"
METRICKIT_APP_BASE = 0x104A5C000
# A MetricKit payload as a device delivers it: one crash, its stack attributed.
METRICKIT_CRASH = {
    "timeStampBegin": "2024-03-04 00:00:00 +0000",
    "crashDiagnostics": [
        {
            "version": "1.0.0",
            "callStackTree": {
                "callStacks": [
                    {
                        "threadAttributed": True,
                        "callStackRootFrames": [
                            {
                                "binaryUUID": METRICKIT_APP_UUID,
                                "offsetIntoBinaryTextSegment": 0x338,
                                "sampleCount": 1,
                                "binaryName": "hello",
                                "address": METRICKIT_APP_BASE + 0x338,
                            }
                        ],
                    }
                ],
                "callStackPerThread": True,
            },
            "diagnosticMetaData": {"signal": 11, "osVersion": "iPhone OS 17.3 (21D50)"},
        }
    ],
    "timeStampEnd": "2024-03-04 23:59:00 +0000",
}
