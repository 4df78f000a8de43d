//! Unix times as the text HTTP and JSON want, without a date library in the component:
//! RFC 3339 ("2026-11-23T12:00:00Z") and the HTTP date of `Date`/`x-ms-date` headers.

/// Unix milliseconds as RFC 3339 UTC to the second: "2026-11-23T12:00:00Z".
pub fn rfc3339(unix_ms: u64) -> String {
    let seconds = unix_ms / 1000;
    let (year, month, day) = civil_from_days(seconds / 86_400);
    let of_day = seconds % 86_400;
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// Unix seconds as an HTTP date (RFC 9110 IMF-fixdate), as the `Date` header and Azure
/// Storage's `x-ms-date` want it: "Mon, 23 Nov 2026 12:12:33 GMT".
pub fn http_date(unix_seconds: u64) -> String {
    const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = unix_seconds / 86_400;
    let of_day = unix_seconds % 86_400;
    let (year, month, day) = civil_from_days(days);
    // `days % 7` is below 7 and `month` within 1..=12, so both indexes are in range.
    format!(
        "{}, {day:02} {} {year} {:02}:{:02}:{:02} GMT",
        WEEKDAYS[(days % 7) as usize],
        MONTHS[(month - 1) as usize],
        of_day / 3600,
        of_day % 3600 / 60,
        of_day % 60
    )
}

/// The proleptic Gregorian date `days` after 1970-01-01 (Howard Hinnant's algorithm).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468;
    let era = z / 146_097;
    let day_of_era = z % 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_handles_epoch_leap_days_and_millis() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400_999), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_709_251_199_000), "2024-02-29T23:59:59Z");
        assert_eq!(rfc3339(1_735_689_600_000), "2025-01-01T00:00:00Z");
    }

    #[test]
    fn http_dates_name_the_weekday_and_month() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(http_date(1_795_435_953), "Mon, 23 Nov 2026 12:12:33 GMT");
    }
}
